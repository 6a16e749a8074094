"""Planning a derivative's next step (transform/plan.py), executed and committed with the
DuckDB test engine: which input blocks a step consumes, and what the block records of them."""
from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.ingest import pull_root
from coordinator.metadata.manifest import load_manifests
from coordinator.metadata.timestamps import IntervalType
from coordinator.transform.execute import pull_derivative
from coordinator.transform.plan import plan_transform
from coordinator.workspace import Workspace, catalog

from ..support.cli import coord
from ..support.fake_engine import FakeEngine
from .pipeline import LARGE, ORDERS, derivative_source, manifest, order_rows, root_source, write_orders_file

CUSTOMERS = "com.example.customers"
NAMED = "com.example.orders.named"  # orders joined with customers: two inputs

LARGE_SQL = f"SELECT event_time, order_id, customer, amount FROM `{ORDERS}` WHERE amount > 10"
NAMED_SQL = f"""SELECT o.event_time, o.order_id, c.name, o.amount
FROM `{ORDERS}` o JOIN `{CUSTOMERS}` c ON o.customer = c.customer"""


def customers_source() -> dict:
    return {
        "kind": "root",
        "fetch": {"kind": "filesGlob", "path": "customers/*.csv", "order": "byName"},
        "read": {"kind": "csv", "header": True,
                 "schema": ["event_time TIMESTAMP", "customer STRING", "name STRING"]},
        "merge": {"kind": "ledger", "primaryKey": ["customer"]},
    }


def write_customers_file(home: Path, name: str, rows: list[tuple[str, str]]) -> None:
    folder = home / "customers"
    folder.mkdir(exist_ok=True)
    lines = ["event_time,customer,name", *(f"2024-01-01T00:00:00Z,{c},{n}" for c, n in rows)]
    (folder / name).write_text("\n".join(lines) + "\n")


@pytest.fixture
def ws(tmp_path) -> Workspace:
    """orders and customers (roots, no data yet); large reads orders, named reads both."""
    ws = Workspace.init(tmp_path)
    folder = tmp_path / "manifests"
    folder.mkdir()
    docs = {ORDERS: manifest(ORDERS, root_source()), CUSTOMERS: manifest(CUSTOMERS, customers_source()),
            LARGE: manifest(LARGE, derivative_source(LARGE_SQL)),
            NAMED: manifest(NAMED, derivative_source(NAMED_SQL, inputs=(ORDERS, CUSTOMERS)))}
    for dataset_id, doc in docs.items():
        (folder / f"{dataset_id}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    catalog.add_datasets(ws, load_manifests([folder]))
    return ws


def ingest_orders(ws: Workspace, name: str, rows: list[tuple]) -> bytes:
    write_orders_file(ws.root, name, rows)
    return pull_root(ws, ORDERS).block_hash


def pull(ws: Workspace, dataset_id: str, tmp_path: Path):
    return pull_derivative(ws, dataset_id, lambda: FakeEngine(tmp_path / "engine-run"))


def records(ws: Workspace, dataset_id: str) -> list[dict]:
    files = ws.dataset(dataset_id).data_files()
    table = pa.concat_tables([pq.read_table(f) for f in files]).drop_columns(["system_time"])
    return sorted(table.to_pylist(), key=lambda r: (r["event_time"], r["order_id"]))


def block(ws: Workspace, dataset_id: str, block_hash: bytes):
    return dict(ws.dataset(dataset_id).blocks())[block_hash]


def large_orders(rows: list[tuple]) -> list[dict]:
    """The filter of LARGE_SQL, by hand."""
    return [{"event_time": t, "order_id": i, "customer": c, "amount": a} for t, i, c, a in rows if a > 10]


def test_a_derivative_waits_for_an_input_that_never_had_data(ws):
    plan = plan_transform(ws, ws.dataset(LARGE))
    assert plan.waiting_for == [ORDERS]
    result = pull(ws, LARGE, ws.root)
    assert result.block_hash is None and "waiting for data from" in result.message


def test_new_input_data_plans_one_step_over_exactly_the_new_blocks(ws, tmp_path):
    rows = order_rows(4)
    first = ingest_orders(ws, "a.csv", rows[:6])
    pull(ws, LARGE, tmp_path)
    second = ingest_orders(ws, "b.csv", rows[6:])

    plan = plan_transform(ws, ws.dataset(LARGE))
    [orders] = plan.inputs
    assert [h for h, _ in orders.blocks] == [second]
    assert orders.after == block(ws, ORDERS, first).system_time
    assert not plan.needs_migration and plan.prev_checkpoint is not None

    h = pull(ws, LARGE, tmp_path).block_hash
    executed = block(ws, LARGE, h)
    [consumed] = executed.input_slices
    second_block = block(ws, ORDERS, second)
    assert consumed.interval.type is IntervalType.LEFT_HALF_OPEN
    assert (consumed.interval.left, consumed.interval.right) == (orders.after, second_block.system_time)
    assert consumed.num_records == len(rows) - 6
    assert consumed.hash == hashlib.sha3_256(second_block.output_slice.hash).digest()
    assert executed.output_slice.num_records == len(large_orders(rows[6:]))
    assert records(ws, LARGE) == large_orders(rows)


def test_nothing_new_plans_no_step_and_commits_no_block(ws, tmp_path):
    ingest_orders(ws, "a.csv", order_rows(2))
    pull(ws, LARGE, tmp_path)
    head = ws.dataset(LARGE).head()

    plan = plan_transform(ws, ws.dataset(LARGE))
    assert plan.up_to_date and plan.inputs[0].blocks == []
    result = pull(ws, LARGE, tmp_path)
    assert result.message == "up to date" and ws.dataset(LARGE).head() == head


def test_two_inputs_get_one_input_slice_each_in_the_order_of_the_inputs(ws, tmp_path):
    rows = order_rows(3)
    ingest_orders(ws, "a.csv", rows)
    write_customers_file(ws.root, "a.csv", [("ann", "Ann Lee"), ("bob", "Bob Roy")])
    customers = pull_root(ws, CUSTOMERS).block_hash
    pull(ws, NAMED, tmp_path)
    late = ingest_orders(ws, "b.csv", order_rows(4)[len(rows):])

    plan = plan_transform(ws, ws.dataset(NAMED))
    assert [[h for h, _ in i.blocks] for i in plan.inputs] == [[late], []]
    h = pull(ws, NAMED, tmp_path).block_hash
    orders_slice, customers_slice = block(ws, NAMED, h).input_slices
    assert orders_slice.interval.right == block(ws, ORDERS, late).system_time
    assert customers_slice.interval.type is IntervalType.EMPTY and customers_slice.num_records == 0
    assert ws.dataset(CUSTOMERS).head() == customers

    # the join over all the rows, in DuckDB, from the CSV files themselves
    db = duckdb.connect()
    db.execute("SET TimeZone = 'UTC'")
    expected = db.sql(f"""
        SELECT o.event_time, o.order_id, c.name, o.amount
        FROM read_csv('{ws.root}/orders/*.csv', types={{'event_time': 'TIMESTAMPTZ'}}) o
        JOIN read_csv('{ws.root}/customers/*.csv') c ON o.customer = c.customer
        ORDER BY o.event_time, o.order_id""").to_arrow_table().to_pylist()
    assert records(ws, NAMED) == expected and len(expected) == 11  # 16 orders, 5 of cid (no name)


@pytest.mark.parametrize("point", ["engine-answered", "checkpoint-installed", "signature-written"])
def test_a_step_killed_before_its_head_moved_is_planned_again_and_committed_once(ws, point):
    rows = order_rows(3)
    ingest_orders(ws, "a.csv", rows)
    before = plan_transform(ws, ws.dataset(LARGE))

    killed = coord("pull", LARGE, cwd=ws.root, env={"COORD_CRASH_AT": point}, check=False, fake_engine=True)
    assert killed.returncode == -9
    again = plan_transform(ws, ws.dataset(LARGE))
    assert again.transaction_id() == before.transaction_id()
    assert [h for h, _ in again.inputs[0].blocks] == [h for h, _ in before.inputs[0].blocks]

    coord("pull", LARGE, cwd=ws.root, fake_engine=True)
    executed = [b for _, b in ws.dataset(LARGE).blocks() if b.input_slices is not None]
    assert len(executed) == 1
    assert records(ws, LARGE) == large_orders(rows)
