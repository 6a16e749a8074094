"""The key columns the engine names for a query run as a batch (Preprocess): the columns that
identify a row of an aggregation's result, by which a recomputed derivative writes a row whose
values change as a correct-from / correct-to pair. Any other shape names none.

All through Preprocess in the shared sandboxed engine, over one small orders file.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_testkit import T0, VOCAB

from coordinator.engine.port import ExecuteInput, PreprocessRequest
from coordinator.metadata.objects import TransformSql

pytestmark = pytest.mark.spark

ORD = "`orders`"


@pytest.fixture(scope="module")
def orders(engine_root):
    path = engine_root.data / "output-key" / "orders.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"event_time": pa.array([T0, T0], pa.timestamp("us", "UTC")),
                             "customer": ["ann", "bob"], "amount": [1.0, 2.0]}), path)
    return path


@pytest.fixture
def key(engine_client, engine_root, orders):
    def run(query: str) -> list[str]:
        result = engine_client.preprocess(PreprocessRequest(
            transaction_id="output-key", dataset_id="x", input_path=None,
            transform=TransformSql(engine="spark", query=query),
            output_path=engine_root.run / "output-key.parquet",
            inputs=[ExecuteInput(dataset_id="orders", vocab=VOCAB, schema=pq.read_schema(orders),
                                 data_paths=[orders])]))
        return list(result.key_columns)
    return run


def test_a_grouped_aggregate_is_keyed_by_its_grouping_columns(key):
    assert key(f"SELECT customer, count(*) AS n, max(event_time) AS event_time FROM {ORD} "
               "GROUP BY customer") == ["customer"]


def test_a_time_window_keys_its_rows_by_the_window_bound_it_outputs(key):
    assert key(f"SELECT window.start AS event_time, customer, sum(amount) AS total FROM {ORD} "
               "GROUP BY window(event_time, '1 hour'), customer") == ["event_time", "customer"]


def test_a_renamed_key_under_a_sort_and_a_having_filter_is_still_the_key(key):
    assert key(f"SELECT upper(customer) AS who, count(*) AS n FROM {ORD} GROUP BY customer "
               "HAVING count(*) > 0 ORDER BY who") == ["who"]


def test_an_aggregate_without_its_grouping_column_in_the_output_has_no_key(key):
    assert key(f"SELECT count(*) AS n FROM {ORD} GROUP BY customer") == []


def test_a_join_and_a_projection_have_no_key(key):
    assert key(f"SELECT a.customer, b.amount FROM {ORD} a JOIN {ORD} b ON a.customer = b.customer") == []
    assert key(f"SELECT customer, amount FROM {ORD}") == []
