"""Issue 9's pipeline through the real coord command: two roots, a derivative that joins them,
windows the join and filters the windows; data in two pulls, then `--set-watermark` on both
roots closes every window still open, in one more pull of the derivative."""
from __future__ import annotations

import pytest
import yaml

from coordinator.metadata.timestamps import parse_timestamp
from tests.chained_streams import (
    FAR_WATERMARK,
    ORDER_ROWS,
    ORDERS_ID,
    SHAPES,
    SHIPMENT_ROWS,
    SHIPMENTS_ID,
    batch_answer,
    canonical,
    in_pulls,
)

from ..support.cli import coord
from .pipeline import manifest
from .test_derivative_pull import blocks, records

pytestmark = pytest.mark.spark
SHIPPING = "com.example.shipping.daily"
SHAPE = SHAPES["left-join-window-filter"]


def root(folder: str, columns: list[str], key: list[str]) -> dict:
    return {
        "kind": "root",
        "fetch": {"kind": "filesGlob", "path": f"{folder}/*.csv", "order": "byName"},
        "read": {"kind": "csv", "header": True, "schema": columns},
        "merge": {"kind": "ledger", "primaryKey": key},
    }


def write_csv(home, folder: str, name: str, rows: list[dict]) -> None:
    (home / folder).mkdir(exist_ok=True)
    lines = [",".join(rows[0])] + [
        ",".join(v.strftime("%Y-%m-%dT%H:%M:%SZ") if k == "event_time" else str(v) for k, v in r.items())
        for r in rows
    ]
    (home / folder / name).write_text("\n".join(lines) + "\n")


def add_shipping_pipeline(home) -> None:
    """A new workspace in ``home`` with the two roots and SHIPPING (the SHAPE query)."""
    coord("init", "--odf", "0.18", cwd=home)
    docs = {
        ORDERS_ID: root("orders", ["event_time TIMESTAMP", "order_id BIGINT", "amount BIGINT"], ["order_id"]),
        SHIPMENTS_ID: root("shipments", ["event_time TIMESTAMP", "order_id BIGINT", "carrier STRING"],
                           ["order_id", "event_time"]),
        SHIPPING: {
            "kind": "derivative", "inputs": [ORDERS_ID, SHIPMENTS_ID],
            "transform": {"kind": "sql", "engine": "spark", "queries": [
                {"alias": a, "query": q} if a else {"query": q} for a, q in SHAPE.steps
            ]},
        },
    }
    (home / "manifests").mkdir()
    for dataset_id, source in docs.items():
        (home / "manifests" / f"{dataset_id}.yaml").write_text(yaml.safe_dump(manifest(dataset_id, source)))
    coord("add", str(home / "manifests"), cwd=home)


def test_set_watermark_on_both_roots_closes_the_windows_behind_a_join(tmp_path):
    home = tmp_path
    add_shipping_pipeline(home)

    parts = zip(in_pulls(ORDER_ROWS, 2), in_pulls(SHIPMENT_ROWS, 2), strict=True)
    for k, (orders, shipments) in enumerate(parts):
        write_csv(home, "orders", f"{k}.csv", orders)
        write_csv(home, "shipments", f"{k}.csv", shipments)
        coord("pull", "-r", SHIPPING, cwd=home)
    open_windows = len(batch_answer(SHAPE)) - len(records(home, SHIPPING))
    assert open_windows > 0

    for root_id in (ORDERS_ID, SHIPMENTS_ID):
        coord("pull", root_id, "--set-watermark", FAR_WATERMARK.isoformat(), cwd=home)
    coord("pull", SHIPPING, cwd=home)

    assert canonical(records(home, SHIPPING)) == batch_answer(SHAPE)
    # The output watermark runs behind the roots' by the join's bound (see README).
    assert parse_timestamp(blocks(home, SHIPPING)[0]["outputWatermark"]) == FAR_WATERMARK - SHAPE.lag
