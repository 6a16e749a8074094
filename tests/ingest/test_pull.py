"""pull_root end to end: real workspace, files, HTTP server and Parquet slices."""
import shutil
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.data.hashing import logical_hash
from coordinator.ingest import IngestError, pull_root
from coordinator.metadata.schema_evolution import SchemaChangeRefused
from coordinator.metadata.timestamps import IntervalType
from coordinator.trust.slice_check import ChangedSlice
from coordinator.workspace.fsutil import physical_hash

from ..support.fake_engine import FakeEngine
from ..support.tamper import flip_a_byte
from .conftest import DATASET, add_dataset, rows_of, slices_of, write

JAN, FEB = datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 2, 1, tzinfo=UTC)

GLOB_SOURCE = """
source:
  kind: root
  fetch: {kind: filesGlob, path: "in/*.csv",
          eventTime: {kind: fromPath, pattern: '(\\d{4}-\\d\\d-\\d\\d)\\.csv'}}
  read: {kind: csv, header: true, schema: ["id BIGINT", "name STRING"]}
  merge: %s
"""


def glob_dataset(ws, merge="{kind: append}"):
    return add_dataset(ws, GLOB_SOURCE % merge)


def test_append_pull_commits_one_slice_with_system_and_event_time_first(ws):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n")
    result = pull_root(ws, DATASET)
    assert (result.num_records, result.message, result.watermark) == (2, "2 new records", JAN)
    [table] = slices_of(ws)
    assert table.column_names == ["system_time", "event_time", "id", "name"]
    assert table.schema.field("system_time").type == pa.timestamp("us", "UTC")
    assert table.column("event_time").to_pylist() == [JAN, JAN]


def test_block_records_hashes_interval_count_and_watermark(ws):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    result = pull_root(ws, DATASET)
    ds = ws.dataset(DATASET)
    h, block = next(ds.blocks())
    assert h == result.block_hash
    s = block.output_slice
    assert s.interval.type is IntervalType.SINGLETON and s.interval.left == block.system_time
    assert s.num_records == 1 and block.output_watermark == JAN
    table = pq.read_table(ds.data_file(h))
    assert s.hash == logical_hash(table) and s.physical_hash == physical_hash(ds.data_file(h))
    assert table.column("system_time").to_pylist() == [block.system_time]


def test_nothing_new_commits_no_block(ws):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    head = ws.dataset(DATASET).head()
    result = pull_root(ws, DATASET)
    assert (result.block_hash, result.message) == (None, "up to date")
    assert ws.dataset(DATASET).head() == head


def test_files_glob_ingests_only_new_files_across_pulls(ws):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n2,b\n")
    write(ws.root / "in" / "2020-03-01.csv", "id,name\n3,c\n")
    result = pull_root(ws, DATASET)
    assert result.num_records == 2 and len(result.blocks) == 1  # append: one slice per pull
    assert [r["id"] for r in rows_of(ws)] == [1, 2, 3]


def test_rows_are_ordered_by_event_time(ws):
    add_dataset(ws, """
        source:
          kind: root
          fetch: {kind: filesGlob, path: "in/*.csv"}
          read: {kind: csv, header: true, schema: ["event_time TIMESTAMP", "v INT"]}
          merge: {kind: append}
    """)
    write(ws.root / "in" / "a.csv", "event_time,v\n2020-02-01,2\n2020-01-01,1\n")
    pull_root(ws, DATASET)
    assert [r["v"] for r in rows_of(ws)] == [1, 2]
    assert ws.dataset(DATASET).state().watermark == FEB


def test_ledger_does_not_repeat_keys_across_or_within_pulls(ws):
    glob_dataset(ws, "{kind: ledger, primaryKey: [id]}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n2,b\n")
    assert pull_root(ws, DATASET).num_records == 2
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n1,a\n2,b\n3,c\n")
    assert pull_root(ws, DATASET).num_records == 1
    assert [r["id"] for r in rows_of(ws)] == [1, 2, 3]


def test_snapshot_makes_one_block_per_file_with_changes(ws):
    glob_dataset(ws, "{kind: snapshot, primaryKey: [id]}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n")
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n2,B\n3,c\n")
    result = pull_root(ws, DATASET)
    assert len(result.blocks) == 2 and result.message == "5 new records in 2 blocks"
    first, second = slices_of(ws)
    assert first.column_names == ["system_time", "event_time", "observed", "id", "name"]
    assert sorted((r["observed"], r["id"], r["name"]) for r in second.to_pylist()) == [
        ("D", 1, "a"), ("I", 3, "c"), ("U", 2, "B")]
    assert set(second.column("event_time").to_pylist()) == {FEB}


def test_snapshot_state_is_rebuilt_from_slices_when_the_cache_is_gone(ws):
    glob_dataset(ws, "{kind: snapshot, primaryKey: [id]}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n")
    pull_root(ws, DATASET)
    for f in (ws.cache_dir(DATASET) / "snapshot-state").iterdir():
        f.unlink()
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n1,a\n")
    assert [(r["observed"], r["id"]) for r in rows_of(ws)[2:]] == [] and \
        pull_root(ws, DATASET).num_records == 1
    assert [(r["observed"], r["id"]) for r in rows_of(ws)[2:]] == [("D", 2)]


def test_unchanged_snapshot_with_later_time_only_advances_the_watermark(ws):
    glob_dataset(ws, "{kind: snapshot, primaryKey: [id]}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n1,a\n")
    result = pull_root(ws, DATASET)
    assert result.num_records == 0 and result.watermark == FEB
    assert result.message == "watermark advanced to 2020-02-01T00:00:00Z"
    _, block = next(ws.dataset(DATASET).blocks())
    assert block.output_slice is None and block.output_watermark == FEB


def test_set_watermark_commits_a_watermark_only_block(ws):
    glob_dataset(ws)
    result = pull_root(ws, DATASET, set_watermark="2020-03-01T00:00:00Z")
    _, block = next(ws.dataset(DATASET).blocks())
    assert block.output_watermark == result.watermark == datetime(2020, 3, 1, tzinfo=UTC)
    assert block.output_slice is None


def test_set_watermark_before_the_current_one_is_refused(ws):
    glob_dataset(ws)
    pull_root(ws, DATASET, set_watermark="2020-03-01T00:00:00Z")
    with pytest.raises(IngestError, match="is before the current watermark 2020-03-01T00:00:00Z"):
        pull_root(ws, DATASET, set_watermark="2020-02-01T00:00:00Z")


def test_http_source_answering_304_is_up_to_date(ws, site):
    url = site.put("/d.csv", b"id,name\n1,a\n", etag='"v1"')
    add_dataset(ws, f"""
        source:
          kind: root
          fetch: {{kind: url, url: "{url}"}}
          read: {{kind: csv, header: true, schema: ["id INT", "name STRING"]}}
          merge: {{kind: append}}
    """)
    assert pull_root(ws, DATASET).num_records == 1
    assert pull_root(ws, DATASET).message == "up to date"
    assert site.requests[-1]["If-None-Match"] == '"v1"'


def test_bad_csv_row_names_file_and_line_and_commits_nothing(ws):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n2,b\n3\n")
    with pytest.raises(IngestError, match=r"^2020-02-01.csv:3: Expected 2 columns, got 1"):
        pull_root(ws, DATASET)
    assert len(list(ws.dataset(DATASET).blocks())) == 1  # only the block `add` made
    assert ws.dataset(DATASET).data_files() == []


def test_failed_pull_is_retried_from_the_same_place(ws):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\nx,a\n")
    with pytest.raises(IngestError):
        pull_root(ws, DATASET)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    assert pull_root(ws, DATASET).num_records == 1


def test_null_event_time_names_column_and_row(ws):
    add_dataset(ws, """
        source:
          kind: root
          fetch: {kind: filesGlob, path: "in/*.csv"}
          read: {kind: csv, header: true, schema: ["event_time TIMESTAMP", "v INT"]}
          merge: {kind: append}
    """)
    write(ws.root / "in" / "a.csv", "event_time,v\n2020-01-01,1\n,2\n")
    with pytest.raises(IngestError, match=r"a.csv: row 2: event time column 'event_time' is null"):
        pull_root(ws, DATASET)
    assert ws.dataset(DATASET).data_files() == []


def test_unparsable_event_time_names_column_and_row(ws):
    add_dataset(ws, """
        source:
          kind: root
          fetch: {kind: filesGlob, path: "in/*.jsonl"}
          read: {kind: jsonLines}
          merge: {kind: append}
        vocab: {eventTimeColumn: when}
    """)
    write(ws.root / "in" / "a.jsonl", '{"when": "2020-01-01"}\n{"when": "later"}\n')
    with pytest.raises(IngestError, match=r"a.jsonl: row 2, column 'when': cannot read 'later'"):
        pull_root(ws, DATASET)


def test_missing_primary_key_column_is_named(ws):
    glob_dataset(ws, "{kind: ledger, primaryKey: [code]}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    with pytest.raises(IngestError, match="primary key column 'code' is not in the data"):
        pull_root(ws, DATASET)


def test_later_data_missing_an_earlier_column_is_refused(ws):
    add_dataset(ws, """
        source:
          kind: root
          fetch: {kind: filesGlob, path: "in/*.csv"}
          read: {kind: csv, header: true}
          merge: {kind: append}
    """)
    write(ws.root / "in" / "a.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    write(ws.root / "in" / "b.csv", "id\n2\n")
    with pytest.raises(SchemaChangeRefused, match=f"{DATASET}: the new data in b.csv drops column 'name'"):
        pull_root(ws, DATASET)


def test_preprocess_runs_in_the_given_engine(ws):
    add_dataset(ws, GLOB_SOURCE.replace("merge:", "preprocess: {kind: sql, engine: spark, "
                                                  "query: 'SELECT id FROM input'}\n  merge:")
                % "{kind: append}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET, engine=lambda: FakeEngine(ws.run_dir / "engine"))
    assert rows_of(ws) == [{"event_time": JAN, "id": 1}]


def test_preprocess_without_an_engine_is_a_clear_error(ws):
    add_dataset(ws, GLOB_SOURCE.replace("merge:", "preprocess: {kind: sql, engine: spark, "
                                                  "query: 'SELECT 1'}\n  merge:") % "{kind: append}")
    with pytest.raises(IngestError, match="preprocess step, which needs the SQL engine"):
        pull_root(ws, DATASET)


def test_progress_reports_bytes(ws):
    glob_dataset(ws)
    path = write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n")
    events = []

    class Recorder:
        def start(self, total, description):
            events.append(("start", total))

        def advance(self, n):
            events.append(("advance", n))

        def finish(self):
            events.append(("finish",))

    pull_root(ws, DATASET, progress=Recorder())
    size = path.stat().st_size
    assert events == [("start", size), ("advance", size), ("finish",)]


@pytest.mark.parametrize("merge", ["ledger", "snapshot"])
def test_a_merge_refuses_an_earlier_slice_that_changed_and_commits_nothing(ws, merge):
    glob_dataset(ws, f"{{kind: {merge}, primaryKey: [id]}}")
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n")
    pull_root(ws, DATASET)
    shutil.rmtree(ws.cache_dir(DATASET) / "snapshot-state", ignore_errors=True)  # read the slices
    [path] = ws.dataset(DATASET).data_files()
    flip_a_byte(path)
    head = ws.dataset(DATASET).head()
    write(ws.root / "in" / "2020-02-01.csv", "id,name\n2,B\n3,c\n")
    with pytest.raises(ChangedSlice, match=f"dataset {DATASET}: refusing to read {path}: "):
        pull_root(ws, DATASET)
    assert ws.dataset(DATASET).head() == head
