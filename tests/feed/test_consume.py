"""fetch kind fileFeed: updates taken oldest first, one block each, by the _SUCCESS convention."""
import gzip
import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from coordinator.build.status import dataset_status
from coordinator.ingest import IngestError, pull_root

from ..ingest.conftest import rows_of
from ..support.cli import coord
from .conftest import add_feed_dataset, csv_part, parquet_bytes

DS = "feed.ds"


def blocks_with_data(ws, dataset_id=DS):
    return [(h, b) for h, b in reversed(list(ws.dataset(dataset_id).blocks())) if b.output_slice]


def state_of(ws, block_hash, dataset_id=DS) -> dict:
    return json.loads(ws.dataset(dataset_id).state_path(block_hash).read_text())


def values(ws):
    return [(r["name"], r["value"]) for r in rows_of(ws, DS)]


def test_complete_updates_are_ingested_oldest_first_one_block_each(ws, feed):
    feed.update("20240102.000000", {"part-0.csv": csv_part(("c", 3))})
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1)),
                                    "part-1.csv": csv_part(("b", 2))})
    add_feed_dataset(ws, feed)

    result = pull_root(ws, DS)

    assert len(result.blocks) == 2
    assert values(ws) == [("a", 1), ("b", 2), ("c", 3)]
    slices = [b.output_slice.num_records for _, b in blocks_with_data(ws)]
    assert slices == [2, 1]


def test_event_time_is_the_update_timestamp(ws, feed):
    feed.update("20240101.123456", {"part-0.csv": csv_part(("a", 1))})
    add_feed_dataset(ws, feed)
    pull_root(ws, DS)
    [row] = rows_of(ws, DS)
    assert row["event_time"] == datetime(2024, 1, 1, 12, 34, 56, tzinfo=UTC)
    assert ws.dataset(DS).state().watermark == datetime(2024, 1, 1, 12, 34, 56, tzinfo=UTC)


def test_block_state_names_the_update_and_its_files(ws, feed):
    feed.update("20240101.000000", {"part-1.csv": csv_part(("a", 1)),
                                    "part-0.csv": csv_part(("b", 2))})
    feed.update("20240102.000000", {"part-0.csv": csv_part(("c", 3))})
    add_feed_dataset(ws, feed)
    first, second = pull_root(ws, DS).blocks
    assert state_of(ws, first)["update"] == "20240101.000000"
    assert state_of(ws, first)["files"] == ["part-0.csv", "part-1.csv"]
    assert state_of(ws, second)["update"] == "20240102.000000"
    assert state_of(ws, second)["consumed"] == {"20240101.000000": 2, "20240102.000000": 1}


def test_only_updates_newer_than_the_last_ingested_are_taken(ws, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    add_feed_dataset(ws, feed)
    pull_root(ws, DS)
    assert pull_root(ws, DS).message == "up to date"
    feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    assert len(pull_root(ws, DS).blocks) == 1
    assert values(ws) == [("a", 1), ("b", 2)]


def test_update_listing_fewer_files_than_success_says_waits_then_is_taken(ws, feed):
    # an eventually consistent store can list _SUCCESS before every part
    feed.put("20240101.000000/part-0.csv", csv_part(("a", 1)))
    feed.put("20240101.000000/_SUCCESS", "2")
    feed.update("20240102.000000", {"part-0.csv": csv_part(("c", 3))})
    add_feed_dataset(ws, feed)

    first = pull_root(ws, DS)
    assert first.blocks == []
    assert first.notes == ["20240101.000000/: incomplete (_SUCCESS says 2 files, 1 listed so "
                           "far); waiting for it"]

    feed.put("20240101.000000/part-1.csv", csv_part(("b", 2)))
    assert len(pull_root(ws, DS).blocks) == 2
    assert values(ws) == [("a", 1), ("b", 2), ("c", 3)]


def test_update_without_success_is_taken_once_it_completes(ws, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))}, success=None)
    add_feed_dataset(ws, feed)
    assert pull_root(ws, DS).blocks == []
    assert dataset_status(ws, ws.dataset(DS)).new_files == []

    feed.put("20240101.000000/_SUCCESS", "1")
    assert len(pull_root(ws, DS).blocks) == 1
    assert values(ws) == [("a", 1)]


def test_update_with_an_extra_empty_file_is_reported_and_never_ingested(ws, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    feed.put("20240101.000000/invalidate", b"")
    feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    add_feed_dataset(ws, feed)

    result = pull_root(ws, DS)
    assert values(ws) == [("b", 2)]
    assert "20240101.000000/: invalidated (2 files listed, _SUCCESS says 1); not ingested" \
        in result.notes
    assert "older than 20240102.000000" not in result.message  # reported as invalid, not late


def test_success_removed_after_ingest_is_reported(ws, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    add_feed_dataset(ws, feed)
    pull_root(ws, DS)
    feed.delete("20240101.000000/_SUCCESS")

    result = pull_root(ws, DS)
    assert result.blocks == []
    assert any(n.startswith("20240101.000000/: invalidated after it was ingested")
               for n in result.notes)


def test_update_older_than_the_ingested_one_is_reported_not_merged(ws, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("late", 0))}, success=None)
    feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    add_feed_dataset(ws, feed)
    pull_root(ws, DS)
    feed.put("20240101.000000/_SUCCESS", "1")

    result = pull_root(ws, DS)
    assert result.blocks == []
    assert values(ws) == [("b", 2)]
    assert result.notes == ["20240101.000000/: older than 20240102.000000, already ingested; "
                            "not merged"]


def test_partitioned_feed_takes_each_partitions_latest_valid_update(ws, feed):
    feed.update("2024-01-01/20240102.000000", {"p.csv": csv_part(("jan1-first", 1))})
    feed.update("2024-01-01/20240103.000000", {"p.csv": csv_part(("jan1-rerun", 2))})
    feed.update("2024-01-01/20240104.000000", {"p.csv": csv_part(("jan1-unfinished", 3))},
                success=None)
    feed.update("2024-01-02/20240103.120000", {"p.csv": csv_part(("jan2", 4))})
    add_feed_dataset(ws, feed, partitions=1)

    result = pull_root(ws, DS)
    assert values(ws) == [("jan1-rerun", 2), ("jan2", 4)]
    assert [state_of(ws, h)["update"] for h in result.blocks] == \
        ["2024-01-01/20240103.000000", "2024-01-02/20240103.120000"]
    assert pull_root(ws, DS).notes == []  # the superseded update is settled, not "older"

    feed.put("2024-01-01/20240104.000000/_SUCCESS", "1")
    assert len(pull_root(ws, DS).blocks) == 1
    assert values(ws)[-1] == ("jan1-unfinished", 3)


def test_gzipped_parts_go_through_the_prepare_steps(ws, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv.gz": gzip.compress(
        csv_part(("a", 1)).encode()), "part-1.csv.gz": gzip.compress(csv_part(("b", 2)).encode())})
    add_feed_dataset(ws, folder_feed, prepare=[{"kind": "decompress", "format": "gzip"}])
    pull_root(ws, DS)
    assert values(ws) == [("a", 1), ("b", 2)]


def test_parquet_parts_are_read_with_the_parquet_read_step(ws, feed):
    part = pa.table({"name": ["a", "b"], "value": pa.array([1, 2], pa.int64())})
    feed.update("20240101.000000", {"part-00000.parquet": parquet_bytes(part)})
    add_feed_dataset(ws, feed, read={"kind": "parquet"})
    pull_root(ws, DS)
    assert values(ws) == [("a", 1), ("b", 2)]


def test_snapshot_merge_diffs_each_update_as_a_whole(ws, folder_feed):
    folder_feed.update("20240101.000000", {"p0.csv": csv_part(("a", 1)), "p1.csv": csv_part(("b", 2))})
    folder_feed.update("20240102.000000", {"p0.csv": csv_part(("a", 1)), "p1.csv": csv_part(("b", 5))})
    add_feed_dataset(ws, folder_feed, merge={"kind": "snapshot", "primaryKey": ["name"]})
    pull_root(ws, DS)
    # one diff per update: "a" unchanged, "b" changed (per-file diffs would see removals)
    assert values(ws) == [("a", 1), ("b", 2), ("b", 5)]


def test_count_marker_that_is_empty_points_to_the_hadoop_option(ws, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))}, success="")
    add_feed_dataset(ws, folder_feed)
    result = pull_root(ws, DS)
    assert result.blocks == []
    assert result.notes == ["20240101.000000/: invalidated (_SUCCESS holds no file count (a "
                            "Spark/Hadoop marker? set successMarker: hadoop)); not ingested"]


def test_hadoop_marker_completes_an_update_by_its_presence(ws, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1)),
                                           ".part-0.csv.crc": b"crc"}, success="")
    add_feed_dataset(ws, folder_feed, successMarker="hadoop")
    pull_root(ws, DS)
    assert values(ws) == [("a", 1)]


def test_hidden_files_and_stray_folders_are_not_data(ws, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    folder_feed.put("20240101.000000/_coord.json", "{}")
    folder_feed.put("20240101.000000/_temporary/0/part-9.csv", csv_part(("x", 9)))
    folder_feed.put("latest/part-0.csv", csv_part(("y", 9)))
    add_feed_dataset(ws, folder_feed)
    result = pull_root(ws, DS)
    assert values(ws) == [("a", 1)]
    assert result.notes == ["latest/: not an update name (YYYYMMDD.HHMMSS), ignored"]


def test_status_lists_the_updates_a_pull_would_take(ws, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    add_feed_dataset(ws, feed)
    pull_root(ws, DS)
    feed.update("20240102.000000", {"p0.csv": csv_part(("b", 1)), "p1.csv": csv_part(("c", 1))})
    assert dataset_status(ws, ws.dataset(DS)).new_files == ["20240102.000000/ (2 files)"]


def test_missing_feed_location_is_an_empty_feed(ws, tmp_path):
    add_feed_dataset(ws, type("F", (), {"url": (tmp_path / "nowhere").as_uri()})())
    assert pull_root(ws, DS).message == "up to date"


def test_bad_url_names_the_url(ws):
    add_feed_dataset(ws, type("F", (), {"url": "ftp://host/feed/"})())
    with pytest.raises(IngestError, match="ftp://host/feed/"):
        pull_root(ws, DS)


def test_pull_from_the_command_line_prints_the_feeds_reports(ws, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    folder_feed.put("20240101.000000/extra", b"")
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    add_feed_dataset(ws, folder_feed)
    done = coord("pull", DS, cwd=ws.root)
    assert done.stdout.splitlines() == [
        f"{DS}: 1 new record; 20240101.000000/: invalidated (2 files listed, _SUCCESS says 1); "
        "not ingested"]


def test_an_update_larger_than_the_slice_limit_killed_midway_resumes_exactly_once(ws, feed):
    rows = [[(f"u1p{p}r{r}", p * 100_000 + r) for r in range(40_000)] for p in range(3)]
    feed.update("20240101.000000", {f"part-{p}.csv": csv_part(*rows[p]) for p in range(3)})
    feed.update("20240102.000000", {"part-0.csv": csv_part(("late", 1))})
    add_feed_dataset(ws, feed)
    ws.save_config(ws.config().set("ingest.maxSliceBytes", "1MiB"))
    killed = coord("pull", DS, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"}, check=False)
    assert killed.returncode == -9
    [(h, _)] = blocks_with_data(ws)
    assert "20240101.000000/part-" in state_of(ws, h)["resume"]["file"]  # within the update

    result = pull_root(ws, DS)

    expected = [v for part in rows for v in part] + [("late", 1)]
    assert sorted(values(ws)) == sorted(expected)  # none lost, none twice
    last = blocks_with_data(ws)[-1][0]
    assert "resume" not in state_of(ws, last) and state_of(ws, last)["update"] == "20240102.000000"
    assert len(result.blocks) >= 3
