"""A plain join with a change-log input is flagged (issue 31, item 4): which inputs are change
logs, and which joins of them are worth a warning, decided from the inputs' sources and the
engine's field lineage of the query (its join conditions)."""
from __future__ import annotations

from coordinator.metadata.objects import (
    DatasetSourceDerivative,
    DatasetSourceRoot,
    FetchStepUrl,
    FieldLineage,
    FieldOrigin,
    FieldSource,
    MergeStrategy,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
    ReadStepCsv,
    TransformSql,
)
from coordinator.transform.change_log import change_log_join_warnings

EVENTS, AIRPORTS = "wx.temps", "ref.airports"


def root(merge: MergeStrategy) -> DatasetSourceRoot:
    return DatasetSourceRoot(fetch=FetchStepUrl(url="https://example.org/x.csv"), read=ReadStepCsv(),
                             merge=merge)


def joined_on(*inputs: str, kind: str = "join") -> FieldLineage:
    """The lineage of a query whose conditions use column ``iata`` of each input as ``kind``."""
    temp = FieldOrigin(field="temp", sources=[FieldSource(input=EVENTS, field="temp", kind="copy")])
    return FieldLineage(fields=[temp],
                        conditions=[FieldSource(input=i, field="iata", kind=kind) for i in inputs])


def warnings_for(airports_merge: MergeStrategy, lineage: FieldLineage | None, temporal=()) -> list[str]:
    sources = {EVENTS: root(MergeStrategyAppend()), AIRPORTS: root(airports_merge)}
    return change_log_join_warnings(lineage, sources, set(temporal))


def test_a_plain_join_with_a_snapshot_root_names_it_and_points_to_temporal_tables():
    [warning] = warnings_for(MergeStrategySnapshot(primary_key=["iata"]), joined_on(EVENTS, AIRPORTS))
    assert warning.startswith(f"{AIRPORTS} is a snapshot root: each change of a row is a record; ")
    assert "matches every version of a row" in warning
    assert "temporalTables" in warning
    assert "\n" not in warning


def test_a_plain_join_with_a_keyed_ledger_root_is_flagged_too():
    [warning] = warnings_for(MergeStrategyLedger(primary_key=["iata"]), joined_on(EVENTS, AIRPORTS))
    assert warning.startswith(f"{AIRPORTS} is a ledger root keyed on iata: every version of a key is a")


def test_an_append_root_and_a_derivative_are_not_change_logs():
    derivative = DatasetSourceDerivative(inputs=["x"], transform=TransformSql(engine="spark", query="q"))
    sources = {EVENTS: root(MergeStrategyAppend()), AIRPORTS: derivative}
    assert change_log_join_warnings(joined_on(EVENTS, AIRPORTS), sources, set()) == []


def test_a_change_log_read_as_a_temporal_table_is_not_flagged():
    snapshot = MergeStrategySnapshot(primary_key=["iata"])
    assert warnings_for(snapshot, joined_on(EVENTS, AIRPORTS), temporal=[AIRPORTS]) == []


def test_a_change_log_only_filtered_on_not_joined_is_not_flagged():
    snapshot = MergeStrategySnapshot(primary_key=["iata"])
    assert warnings_for(snapshot, joined_on(AIRPORTS, kind="filter")) == []


def test_a_query_the_engine_could_not_trace_is_not_checked():
    assert warnings_for(MergeStrategySnapshot(primary_key=["iata"]), None) == []
