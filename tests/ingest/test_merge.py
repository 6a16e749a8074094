"""Merge strategies on in-memory tables: ledger dedup, snapshot change data capture."""
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from coordinator.ingest import IngestError
from coordinator.ingest.merge import SnapshotColumns, check_key, ledger, projection, snapshot
from coordinator.metadata.objects import MergeStrategySnapshot

T0 = datetime(2020, 1, 1, tzinfo=UTC)
T1 = datetime(2020, 2, 1, tzinfo=UTC)
TS = pa.timestamp("us", "UTC")


def roles(**kw) -> SnapshotColumns:
    return SnapshotColumns.of(MergeStrategySnapshot(primary_key=kw.pop("key", ["id"]), **kw))


def snap(t, **columns) -> pa.Table:
    n = len(next(iter(columns.values())))
    return pa.table({"event_time": pa.array([t] * n, TS), **columns})


def observed(changes: pa.Table, obs="observed") -> dict:
    return {r["id"]: (r[obs], r["name"]) for r in changes.to_pylist()}


def test_ledger_skips_keys_seen_before_and_repeats_within_the_pull():
    new = pa.table({"id": [1, 2, 2, 3], "v": ["a", "b", "b2", "c"]})
    seen = pa.table({"id": [1]})
    assert ledger(new, ["id"], seen).to_pylist() == [{"id": 2, "v": "b"}, {"id": 3, "v": "c"}]


def test_ledger_with_a_composite_key():
    new = pa.table({"a": ["x", "x", "y"], "b": [1, 2, 1]})
    assert ledger(new, ["a", "b"], pa.table({"a": ["x"], "b": [2]})).num_rows == 2


def test_snapshot_first_state_is_all_added():
    changes = snapshot(None, snap(T0, id=[1, 2], name=["a", "b"]), roles(), "event_time", T0, "f")
    assert observed(changes) == {1: ("I", "a"), 2: ("I", "b")}
    assert changes.column_names == ["observed", "event_time", "id", "name"]


def test_snapshot_emits_added_changed_and_removed_with_previous_values():
    before = snap(T0, id=[1, 2, 3], name=["a", "b", "c"])
    after = snap(T1, id=[1, 2, 4], name=["a", "B", "d"])
    changes = snapshot(before, after, roles(), "event_time", T1, "f")
    assert observed(changes) == {2: ("U", "B"), 4: ("I", "d"), 3: ("D", "c")}
    assert set(changes.column("event_time").to_pylist()) == {T1}


def test_snapshot_compare_columns_limit_what_counts_as_a_change():
    before = snap(T0, id=[1], name=["a"], score=[1])
    after = snap(T1, id=[1], name=["a"], score=[2])
    assert snapshot(before, after, roles(compare_columns=["name"]), "event_time", T1, "f").num_rows == 0
    assert snapshot(before, after, roles(), "event_time", T1, "f").num_rows == 1


def test_snapshot_custom_observation_column_and_values():
    r = roles(observation_column="op", obsv_added="+", obsv_changed="~", obsv_removed="-")
    before = snap(T0, id=[1, 2], name=["a", "b"])
    after = snap(T1, id=[2, 3], name=["x", "c"])
    assert observed(snapshot(before, after, r, "event_time", T1, "f"), "op") == {
        1: ("-", "a"), 2: ("~", "x"), 3: ("+", "c")}


def test_snapshot_treats_null_as_equal_to_null_and_nan_to_nan():
    before = snap(T0, id=[1, 2], name=[None, "b"], v=[float("nan"), 1.0])
    after = snap(T1, id=[1, 2], name=[None, "b"], v=[float("nan"), 1.0])
    assert snapshot(before, after, roles(), "event_time", T1, "f").num_rows == 0


def test_snapshot_with_a_repeated_key_is_an_error():
    with pytest.raises(IngestError, match=r"f: rows 1 and 2 have the same primary key \{'id': 7\}"):
        snapshot(None, snap(T0, id=[7, 7], name=["a", "b"]), roles(), "event_time", T0, "f")


def test_projection_keeps_each_keys_latest_row_and_drops_removed_keys():
    history = pa.table({"observed": ["I", "I", "U", "D"], "id": [1, 2, 1, 2],
                        "name": ["a", "b", "A", "b"]})
    assert projection(history, roles()).to_pylist() == [{"observed": "U", "id": 1, "name": "A"}]


@pytest.mark.parametrize("ids", [
    [3, 1, 2],  # a narrow range: the ids are their own codes
    [-(2**63), 2**63 - 1, 0],  # the widest range: hashed
    [2**40, 2**40 + 7, 2**40 + 3],  # narrow but far from zero
])
def test_integer_keys_match_across_snapshots_whatever_their_range(ids):
    before = snap(T0, id=pa.array(ids, pa.int64()), name=["a", "b", "c"])
    after = snap(T1, id=pa.array([ids[2], ids[0]], pa.int64()), name=["c", "a2"])
    changes = snapshot(before, after, roles(), "event_time", T1, "s.csv")
    assert observed(changes) == {ids[0]: ("U", "a2"), ids[1]: ("D", "b")}


def test_missing_key_column_is_named():
    with pytest.raises(IngestError, match=r"f: primary key column 'id' is not in the data"):
        check_key(pa.table({"x": [1]}), ["id"], "f")


def test_null_key_is_named_with_its_row():
    with pytest.raises(IngestError, match=r"f: row 2: primary key column 'id' is null"):
        check_key(pa.table({"id": [1, None]}), ["id"], "f")
