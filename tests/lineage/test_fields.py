"""Field-level lineage walks over what the chains record (``MetadataBlock.fieldLineage``).

The lineage here is written by hand into real chains (the engine derives it in practice), so
these tests pin the walks: backward to the roots' columns, forward to every dependent column,
conditions reaching every row, depth, and the versions in force over a time range."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from coordinator.lineage.fields import FieldGraph, FieldRef, field_versions
from coordinator.metadata.objects import FieldLineage, FieldOrigin, FieldSource, MetadataBlock
from coordinator.workspace import Workspace
from tests.support.cli import MANIFESTS, coord
from tests.support.manifests import derivative_manifest

ORDERS, DAILY, REPORT = "com.example.orders", "com.example.orders.daily", "com.example.report"
REPORT_MANIFEST = derivative_manifest(REPORT, [DAILY], f"SELECT day, total * 2 AS doubled FROM `{DAILY}`")
T1, T2, T3 = (datetime(2030, 1, d, tzinfo=UTC) for d in (1, 2, 3))


def record(ws: Workspace, dataset: str, at: datetime, lineage: FieldLineage) -> None:
    with ws.dataset(dataset).writer() as w:
        w.commit(MetadataBlock(system_time=at, field_lineage=lineage))


def src(input_: str, field: str, kind: str, expression: str | None = None) -> FieldSource:
    return FieldSource(input=input_, field=field, kind=kind, expression=expression)


DAILY_V1 = FieldLineage(
    fields=[FieldOrigin(field="day", sources=[src(ORDERS, "event_time", "transform", "date(event_time)")]),
            FieldOrigin(field="total", sources=[src(ORDERS, "amount", "aggregate", "sum(amount)")])],
    conditions=[src(ORDERS, "status", "filter")],
)
DAILY_V2 = FieldLineage(
    fields=[FieldOrigin(field="day", sources=[src(ORDERS, "event_time", "transform")]),
            FieldOrigin(field="total", sources=[src(ORDERS, "quantity", "aggregate")])],
)
REPORT_V1 = FieldLineage(
    fields=[FieldOrigin(field="day", sources=[src(DAILY, "day", "copy")]),
            FieldOrigin(field="doubled", sources=[src(DAILY, "total", "transform", "total * 2")])],
)


@pytest.fixture
def ws(tmp_path) -> Workspace:
    coord("init", "--odf", "0.18", cwd=tmp_path)
    (tmp_path / "report.yaml").write_text(REPORT_MANIFEST)
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), str(MANIFESTS / f"{DAILY}.yaml"),
          str(tmp_path / "report.yaml"), cwd=tmp_path)
    workspace = Workspace.open(tmp_path)
    record(workspace, DAILY, T1, DAILY_V1)
    record(workspace, REPORT, T1, REPORT_V1)
    return workspace


def test_backward_reaches_the_root_columns_through_every_hop(ws):
    edges = FieldGraph(ws).backward(REPORT, "doubled")
    assert {(str(e.source), str(e.target), e.kind) for e in edges} == {
        (f"{DAILY}.total", f"{REPORT}.doubled", "transform"),
        (f"{ORDERS}.amount", f"{DAILY}.total", "aggregate"),
        (f"{ORDERS}.status", f"{DAILY}.*", "filter"),
    }


def test_depth_limits_the_hops(ws):
    edges = FieldGraph(ws).backward(REPORT, "doubled", depth=1)
    assert [(str(e.source), e.expression) for e in edges] == [(f"{DAILY}.total", "total * 2")]


def test_forward_follows_readers_of_readers(ws):
    targets = {e.target for e in FieldGraph(ws).forward(ORDERS, "amount")}
    assert targets == {FieldRef(DAILY, "total"), FieldRef(REPORT, "doubled")}


def test_a_condition_column_reaches_every_row_of_its_reader(ws):
    edges = FieldGraph(ws).forward(ORDERS, "status")
    assert [(e.target, e.kind) for e in edges] == [(FieldRef(DAILY, None), "filter")]


def test_a_root_column_has_no_lineage_behind_it(ws):
    assert FieldGraph(ws).backward(ORDERS, "amount") == []


def test_the_newest_version_is_used_without_a_time_range(ws):
    record(ws, DAILY, T2, DAILY_V2)
    edges = FieldGraph(ws).backward(DAILY, "total")
    assert [(str(e.source), e.version) for e in edges] == [(f"{ORDERS}.quantity", T2)]


def test_a_time_range_gives_every_version_in_force_during_it(ws):
    record(ws, DAILY, T2, DAILY_V2)
    both = FieldGraph(ws, since=T1, until=T3).backward(DAILY, "total")
    assert {(str(e.source), e.version) for e in both} == {
        (f"{ORDERS}.amount", T1), (f"{ORDERS}.status", T1), (f"{ORDERS}.quantity", T2)}
    first_only = FieldGraph(ws, until=datetime(2030, 1, 1, 12, tzinfo=UTC)).backward(DAILY, "total")
    assert {e.version for e in first_only} == {T1}


def test_a_chain_without_recorded_lineage_has_no_versions(ws):
    assert field_versions(ws, ORDERS) == []
