"""Field lineage derived by the real sandboxed engine during `coord pull`, recorded on the chain,
answered by `coord lineage` without an engine and re-derived by `coord verify`.

The pipeline joins orders with shipments, then windows the join per day and filters the windows
(issue 9's "left-join-window-filter" shape); the expected lineage is worked out by hand from
its three steps."""
from __future__ import annotations

import json

import pytest

from tests.chained_streams import ORDER_ROWS, ORDERS_ID, SHIPMENT_ROWS, SHIPMENTS_ID, in_pulls

from ..support.cli import coord
from .test_chained_pull import SHIPPING, add_shipping_pipeline, write_csv
from .test_derivative_pull import blocks

pytestmark = pytest.mark.spark


def test_a_join_then_a_window_is_recorded_once_queried_and_verified(tmp_path):
    home = tmp_path
    add_shipping_pipeline(home)  # the left-join-window-filter shape
    for k, (orders, shipments) in enumerate(zip(in_pulls(ORDER_ROWS, 2), in_pulls(SHIPMENT_ROWS, 2),
                                                strict=True)):
        write_csv(home, "orders", f"{k}.csv", orders)
        write_csv(home, "shipments", f"{k}.csv", shipments)
        coord("pull", "-r", SHIPPING, cwd=home)

    # recorded on the first executed block only: the query and input schemas did not change
    recorded = [b["fieldLineage"] for b in blocks(home, SHIPPING) if "fieldLineage" in b]
    assert len(recorded) == 1

    mapping = json.loads(coord("lineage", SHIPPING, "--fields", "-o", "json", cwd=home).stdout)
    got = {(e["target"]["field"], e["source"]["dataset"], e["source"]["field"], e["kind"])
           for e in mapping["edges"]}
    assert got == {
        # joined: o.event_time -> daily: window(event_time).end
        ("event_time", ORDERS_ID, "event_time", "window"),
        ("order_id", ORDERS_ID, "order_id", "copy"),
        # n = count(*): no column
        # count(shipped_at), shipped_at = s.event_time
        ("shipped", SHIPMENTS_ID, "event_time", "aggregate"),
        ("amount", ORDERS_ID, "amount", "aggregate"),
        # rows: the join's ON, the window's keys (its non-null filter included), WHERE shipped < 2
        (None, ORDERS_ID, "order_id", "join"), (None, SHIPMENTS_ID, "order_id", "join"),
        (None, ORDERS_ID, "event_time", "join"), (None, SHIPMENTS_ID, "event_time", "join"),
        (None, ORDERS_ID, "order_id", "groupBy"), (None, ORDERS_ID, "event_time", "window"),
        (None, SHIPMENTS_ID, "event_time", "filter"),
    }

    tree = coord("lineage", SHIPPING, "--field", "amount", cwd=home).stdout
    assert f"aggregate sum(amount) ← {ORDERS_ID}.amount" in tree
    assert "fetched from orders/*.csv, read as csv" in tree
    forward = json.loads(coord("lineage", SHIPMENTS_ID, "--field", "carrier", "--direction", "forward",
                               "-o", "json", cwd=home).stdout)
    assert forward["edges"] == []  # the carrier is joined in but no output column uses it

    assert "reproducibility: reproduced" in coord("verify", SHIPPING, cwd=home).stdout
