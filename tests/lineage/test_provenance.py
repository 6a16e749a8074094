"""Record provenance (`coord provenance`) through the real sandboxed Spark engine.

One workspace: the orders and shipments streams of tests/chained_streams.py, ingested in two
pulls (two slices each), and one derivative per plan shape. Every expected answer is found
by hand in the roots' own slices: the input rows whose values make the chosen record."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.workspace import Workspace
from tests.chained_streams import (
    ORDER_ROWS,
    ORDERS_ID,
    ORDERS_WITH_SHIPMENTS,
    SHIPMENT_ROWS,
    SHIPMENTS_ID,
    in_pulls,
)
from tests.support.cli import coord
from tests.transform.pipeline import manifest
from tests.transform.test_chained_pull import root, write_csv

pytestmark = pytest.mark.spark
QUERIES = {
    "big": "SELECT event_time, order_id, amount * 10 AS amount10 FROM `com.example.orders` WHERE amount > 3",
    "inner": ORDERS_WITH_SHIPMENTS.format(kind="INNER"),
    "left": ORDERS_WITH_SHIPMENTS.format(kind="LEFT"),
    "days2": "SELECT window.end AS event_time, count(*) AS n, sum(amount) AS amount "
             "FROM `com.example.orders` GROUP BY window(event_time, '2 days')",
    "union": "SELECT event_time, order_id FROM `com.example.orders` "
             "UNION ALL SELECT event_time, order_id FROM `com.example.shipments`",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("provenance")
    coord("init", "--odf", "0.18", cwd=home)
    docs = {
        ORDERS_ID: root("orders", ["event_time TIMESTAMP", "order_id BIGINT", "amount BIGINT"], ["order_id"]),
        SHIPMENTS_ID: root("shipments", ["event_time TIMESTAMP", "order_id BIGINT", "carrier STRING"],
                           ["order_id", "event_time"]),
    }
    for name, query in QUERIES.items():
        inputs = [ORDERS_ID] if name == "big" else [ORDERS_ID, SHIPMENTS_ID]
        docs[name] = {"kind": "derivative", "inputs": inputs,
                      "transform": {"kind": "sql", "engine": "spark", "query": query}}
    (home / "manifests").mkdir()
    for dataset_id, source in docs.items():
        (home / "manifests" / f"{dataset_id}.yaml").write_text(yaml.safe_dump(manifest(dataset_id, source)))
    coord("add", str(home / "manifests"), cwd=home)
    for k, (orders, shipments) in enumerate(zip(in_pulls(ORDER_ROWS, 2), in_pulls(SHIPMENT_ROWS, 2),
                                                strict=True)):
        write_csv(home, "orders", f"{k}.csv", orders)
        write_csv(home, "shipments", f"{k}.csv", shipments)
        coord("pull", "-r", *QUERIES, cwd=home)
    return home


def rows_of(home, dataset_id: str) -> list[tuple[str, int, dict]]:
    """Every record of the dataset as (block hash, row in its slice, values)."""
    ds = Workspace.open(home).dataset(dataset_id)
    found = []
    for h, b in ds.blocks():
        if b.output_slice is not None:
            for row, values in enumerate(pq.read_table(ds.data_file(h)).to_pylist()):
                found.append((h.hex(), row, values))
    return found


def where(home, dataset_id: str, **match) -> tuple[str, int, dict]:
    """The one record of the dataset with these values."""
    found = [r for r in rows_of(home, dataset_id) if all(r[2][k] == v for k, v in match.items())]
    assert len(found) == 1, found
    return found[0]


def provenance(home, dataset_id: str, *args: str) -> dict:
    out = coord("provenance", dataset_id, *args, "-o", "json", cwd=home).stdout
    return json.loads(out)


def inputs_of(derivation: dict) -> set[tuple[str, str, int]]:
    return {(i["dataset"], i["block"], i["row"]) for i in derivation["inputs"]}


def test_a_filtered_projection_comes_from_one_row_of_the_slice_its_block_consumed(home):
    block, row, record = where(home, "big", order_id=38)
    answer = provenance(home, "big", "--block", block[:12], "--row", str(row))

    [derivation] = answer["records"][0]["derivations"]
    order_block, order_row, order = where(home, ORDERS_ID, order_id=38)
    assert inputs_of(derivation) == {(ORDERS_ID, order_block, order_row)}
    assert order_block != rows_of(home, ORDERS_ID)[-1][0]  # the second pull's slice, not the first
    [amount10] = [c for c in derivation["columns"] if c["column"] == "amount10"]
    assert (amount10["kind"], amount10["field"]) == ("transform", "amount")
    assert amount10["values"] == [str(order["amount"])]
    assert record["amount10"] == 10 * order["amount"]


def test_an_inner_join_record_comes_from_one_order_and_one_of_its_two_shipments(home):
    shipped = [s for s in SHIPMENT_ROWS if s["order_id"] == 12]
    assert len(shipped) == 2  # every sixth order ships twice
    block, row, _ = where(home, "inner", order_id=12, shipped_at=shipped[1]["event_time"])
    answer = provenance(home, "inner", "--block", block, "--row", str(row))

    [derivation] = answer["records"][0]["derivations"]
    order_block, order_row, _ = where(home, ORDERS_ID, order_id=12)
    ship_block, ship_row, _ = where(home, SHIPMENTS_ID, order_id=12, event_time=shipped[1]["event_time"])
    assert inputs_of(derivation) == {(ORDERS_ID, order_block, order_row),
                                     (SHIPMENTS_ID, ship_block, ship_row)}


def test_a_left_join_record_without_a_match_comes_from_the_order_alone(home):
    assert not [s for s in SHIPMENT_ROWS if s["order_id"] == 4]  # every fifth order never ships
    block, row, record = where(home, "left", order_id=4)
    assert record["carrier"] is None
    answer = provenance(home, "left", "--block", block, "--where", "order_id = 4")

    [derivation] = answer["records"][0]["derivations"]
    order_block, order_row, _ = where(home, ORDERS_ID, order_id=4)
    assert inputs_of(derivation) == {(ORDERS_ID, order_block, order_row)}
    assert answer["records"][0]["row"] == row


def test_a_window_fed_by_two_slices_comes_from_every_order_of_the_window_in_both(home):
    first, second = in_pulls(ORDER_ROWS, 2)
    span = timedelta(days=2)
    start = datetime.fromtimestamp(first[-1]["event_time"].timestamp() // span.total_seconds()
                                   * span.total_seconds(), UTC)  # Spark aligns windows to the epoch
    orders = [o for o in ORDER_ROWS if start <= o["event_time"] < start + span]
    assert orders[0] in first and orders[-1] in second  # the window spans both pulls
    block, row, record = where(home, "days2", event_time=start + span)
    assert (record["n"], record["amount"]) == (len(orders), sum(o["amount"] for o in orders))

    text = coord("provenance", "days2", "--block", block, "--row", str(row), cwd=home).stdout
    assert f"made from {len(orders)} input record(s)" in text
    answer = provenance(home, "days2", "--block", block, "--row", str(row))

    [derivation] = answer["records"][0]["derivations"]
    expected = {(ORDERS_ID, *where(home, ORDERS_ID, order_id=o["order_id"])[:2]) for o in orders}
    assert inputs_of(derivation) == expected
    assert len({b for _, b, _ in expected}) == 2  # two slices of the orders
    [amount] = [c for c in derivation["columns"] if c["column"] == "amount"]
    assert amount["kind"] == "aggregate"
    assert sorted(map(int, amount["values"])) == sorted(o["amount"] for o in orders)


def test_a_union_is_refused_by_name(home):
    block, row, _ = rows_of(home, "union")[0]
    proc = coord("provenance", "union", "--block", block, "--row", str(row), cwd=home,
                 check=False)
    assert proc.returncode != 0
    assert "not supported for this query: a UNION" in proc.stderr
