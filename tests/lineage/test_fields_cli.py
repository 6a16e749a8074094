"""``coord lineage --field/--fields/-o openlineage``: column lineage read from the chains alone.

The lineage is written by hand into real chains (test_field_lineage.py's workspace:
orders -> orders.daily -> report); the engine's derivation is tested in tests/engine/."""
from __future__ import annotations

import json

from coordinator.lineage.fields import FieldGraph
from coordinator.lineage.openlineage import openlineage_events, to_json
from tests.lineage.test_fields import DAILY, DAILY_V2, ORDERS, REPORT, T2, record, ws  # noqa: F401
from tests.support.cli import coord


def test_backward_tree_shows_operations_down_to_the_root_and_its_source(ws):  # noqa: F811
    text = coord("lineage", REPORT, "--field", "doubled", cwd=ws.root).stdout
    assert f"transform total * 2 ← {DAILY}.total" in text
    assert f"aggregate sum(amount) ← {ORDERS}.amount" in text
    assert "rows decided by" in text and f"filter ← {ORDERS}.status" in text
    assert "fetched from data/orders-*.csv.gz, read as csv" in text


def test_backward_json_lists_edges_and_root_sources(ws):  # noqa: F811
    answer = json.loads(coord("lineage", REPORT, "--field", "doubled", "-o", "json", cwd=ws.root).stdout)
    assert {(e["source"]["field"], e["target"]["dataset"], e["kind"]) for e in answer["edges"]} == {
        ("total", REPORT, "transform"), ("amount", DAILY, "aggregate"), ("status", DAILY, "filter")}
    assert answer["roots"] == {f"{ORDERS}.amount": "fetched from data/orders-*.csv.gz, read as csv",
                               f"{ORDERS}.status": "fetched from data/orders-*.csv.gz, read as csv"}


def test_forward_reaches_every_dependent_column(ws):  # noqa: F811
    answer = json.loads(coord("lineage", ORDERS, "--field", "amount", "--direction", "forward",
                              "-o", "json", cwd=ws.root).stdout)
    assert {(e["target"]["dataset"], e["target"]["field"]) for e in answer["edges"]} == {
        (DAILY, "total"), (REPORT, "doubled")}


def test_depth_stops_after_n_hops(ws):  # noqa: F811
    answer = json.loads(coord("lineage", REPORT, "--field", "doubled", "--depth", "1", "-o", "json",
                              cwd=ws.root).stdout)
    assert [e["source"]["field"] for e in answer["edges"]] == ["total"]


def test_without_field_the_mapping_of_every_upstream_derivative(ws):  # noqa: F811
    answer = json.loads(coord("lineage", REPORT, "--fields", "-o", "json", cwd=ws.root).stdout)
    assert {(e["target"]["dataset"], e["target"]["field"]) for e in answer["edges"]} == {
        (REPORT, "day"), (REPORT, "doubled"), (DAILY, "day"), (DAILY, "total"), (DAILY, None)}


def test_since_until_gives_each_query_version(ws):  # noqa: F811
    record(ws, DAILY, T2, DAILY_V2)
    answer = json.loads(coord("lineage", DAILY, "--field", "total", "--since", "2030-01-01T00:00:00Z",
                              "-o", "json", cwd=ws.root).stdout)
    assert {(e["source"]["field"], e["version"]) for e in answer["edges"]} == {
        ("amount", "2030-01-01T00:00:00Z"), ("status", "2030-01-01T00:00:00Z"),
        ("quantity", "2030-01-02T00:00:00Z")}


def test_unknown_field_is_a_one_line_error_naming_the_known_ones(ws):  # noqa: F811
    proc = coord("lineage", REPORT, "--field", "nope", cwd=ws.root, check=False)
    assert proc.returncode != 0
    assert "has no column 'nope'" in proc.stderr and "day, doubled" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_openlineage_events_are_library_models_with_column_lineage(ws):  # noqa: F811
    from openlineage.client.event_v2 import RunEvent, RunState
    from openlineage.client.facet_v2 import column_lineage_dataset as cl

    record(ws, DAILY, T2, DAILY_V2)
    events = openlineage_events(FieldGraph(ws), ws, REPORT)
    assert all(isinstance(e, RunEvent) and e.eventType is RunState.COMPLETE for e in events)
    # one per query version: daily's two, report's one
    assert [e.job.name for e in events] == [DAILY, REPORT, DAILY]
    facet = events[0].outputs[0].facets["columnLineage"]
    assert isinstance(facet, cl.ColumnLineageDatasetFacet)
    total = facet.fields["total"].inputFields[0]
    assert (total.name, total.field, total.transformations[0].type, total.transformations[0].subtype,
            total.transformations[0].description) == (
        ORDERS, "amount", "DIRECT", "AGGREGATION", "sum(amount)")
    assert [(f.name, f.field, f.transformations[0].subtype) for f in facet.dataset] == [
        (ORDERS, "status", "FILTER")]
    root = events[0].inputs[0]
    assert (root.name, root.facets["dataSource"].uri) == (ORDERS, "data/orders-*.csv.gz")


def test_openlineage_cli_output_is_the_events_json(ws):  # noqa: F811
    answer = json.loads(coord("lineage", REPORT, "-o", "openlineage", cwd=ws.root).stdout)
    assert json.loads(to_json(openlineage_events(FieldGraph(ws), ws, REPORT))) == answer
    report = answer[-1]
    assert report["eventType"] == "COMPLETE" and report["job"]["name"] == REPORT
    mapping = report["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert mapping["doubled"]["inputFields"][0]["field"] == "total"
    assert mapping["doubled"]["inputFields"][0]["transformations"][0]["subtype"] == "TRANSFORMATION"
    assert report["outputs"][0]["facets"]["columnLineage"]["_schemaURL"].endswith(
        "ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet")
