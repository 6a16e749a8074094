"""coord publish DS --to-feed URL: blocks as File Feed updates that a fileFeed root reads back."""
import io
import json

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from coordinator.data.hashing import logical_hash
from coordinator.ingest import pull_root
from coordinator.repository.feed import update_name
from coordinator.repository.publish import PublishError, publish
from coordinator.trust.slice_check import ChangedSlice
from coordinator.workspace import Workspace, layout

from ..ingest.conftest import add_dataset, write
from ..support.cli import coord
from ..support.tamper import flip_a_byte
from .conftest import add_feed_dataset

SRC = "src.events"


def source_dataset(ws: Workspace, pulls: int = 2) -> list[bytes]:
    """A root dataset of ``pulls`` blocks (one CSV file each, with its own event times)."""
    add_dataset(ws, """
        source:
          kind: root
          fetch: {kind: filesGlob, path: "in/*.csv"}
          read: {kind: csv, header: true, schema: ["event_time TIMESTAMP", "city STRING", "n BIGINT"]}
          merge: {kind: append}
        """, SRC)
    blocks = []
    for i in range(pulls):
        write(ws.root / "in" / f"{i}.csv", f"""
            event_time,city,n
            2024-01-0{i + 1}T10:00:00Z,Oslo,{i}
            2024-01-0{i + 1}T11:00:00Z,Rome,{10 + i}
            """)
        blocks += pull_root(ws, SRC).blocks
    return blocks


def data_blocks(ws: Workspace, dataset_id: str):
    return [b for _, b in reversed(list(ws.dataset(dataset_id).blocks())) if b.output_slice]


def test_each_new_block_becomes_one_update_named_by_its_system_time(ws, feed):
    blocks = source_dataset(ws)
    result = publish(ws, SRC, feed.url)
    seconds = [update_name(b.system_time) for b in data_blocks(ws, SRC)]
    assert result.updates[0] == seconds[0]
    # names only grow: a block in the same second as the previous update takes the next one
    assert result.updates[1] == seconds[1] if seconds[1] > seconds[0] else \
        result.updates[1] > result.updates[0]
    for name, h in zip(result.updates, blocks, strict=True):
        assert feed.get(f"{name}/_SUCCESS") == b"1"
        manifest = json.loads(feed.get(f"{name}/_coord.json"))
        assert (manifest["dataset"], manifest["blocks"]) == (SRC, [h.hex()])


def test_coord_json_names_the_logical_hash_of_the_part_it_describes(ws, folder_feed):
    source_dataset(ws, pulls=1)
    [name] = publish(ws, SRC, folder_feed.url).updates
    [block] = data_blocks(ws, SRC)
    manifest = json.loads(folder_feed.get(f"{name}/_coord.json"))
    [entry] = manifest["slices"]
    part = pq.read_table(folder_feed.folder / name / entry["file"])
    assert "system_time" not in part.column_names
    assert entry["logicalHash"] == logical_hash(part).hex() == block.output_slice.hash.hex()
    assert entry["numRecords"] == part.num_rows == 2


def test_success_is_written_after_every_other_file_of_the_update(ws, folder_feed):
    source_dataset(ws, pulls=1)
    [name] = publish(ws, SRC, folder_feed.url).updates
    files = {p.name: p.stat().st_mtime_ns for p in (folder_feed.folder / name).iterdir()}
    assert set(files) == {"part-00000.parquet", "_coord.json", "_SUCCESS"}
    assert files["_SUCCESS"] >= max(files.values())


def test_republishing_writes_nothing(ws, feed):
    source_dataset(ws)
    publish(ws, SRC, feed.url)
    before = {n: feed.get(n) for n in feed.names()}
    again = publish(ws, SRC, feed.url)
    assert again.updates == []
    assert again.message == f"nothing new to publish to {feed.url}"
    assert {n: feed.get(n) for n in feed.names()} == before


def test_only_blocks_added_since_are_published_next_time(ws, folder_feed):
    source_dataset(ws, pulls=1)
    publish(ws, SRC, folder_feed.url)
    write(ws.root / "in" / "9.csv", "event_time,city,n\n2024-02-01T00:00:00Z,Oslo,99\n")
    second = pull_root(ws, SRC).blocks
    result = publish(ws, SRC, folder_feed.url)
    assert len(result.updates) == 1
    assert json.loads(folder_feed.get(f"{result.updates[0]}/_coord.json"))["blocks"] == \
        [second[0].hex()]


def test_since_last_puts_every_new_block_in_one_update(ws, folder_feed):
    blocks = source_dataset(ws, pulls=3)
    [name] = publish(ws, SRC, folder_feed.url, since_last=True).updates
    assert name >= update_name(data_blocks(ws, SRC)[-1].system_time)
    assert folder_feed.get(f"{name}/_SUCCESS") == b"3"
    assert json.loads(folder_feed.get(f"{name}/_coord.json"))["blocks"] == [h.hex() for h in blocks]


def test_an_update_left_without_success_is_finished_by_the_next_run(ws, feed):
    source_dataset(ws, pulls=1)
    [name] = publish(ws, SRC, feed.url).updates
    # what an interrupted run leaves: a partial update, no _SUCCESS, nothing recorded
    feed.delete(f"{name}/_SUCCESS")
    feed.put(f"{name}/part-00000.parquet", b"half a file")
    (ws.meta / layout.cache_dir(SRC, layout.PUBLISHED)).unlink()

    assert publish(ws, SRC, feed.url).updates == [name]
    assert feed.get(f"{name}/_SUCCESS") == b"1"
    assert pq.read_table(io.BytesIO(feed.get(f"{name}/part-00000.parquet"))).num_rows == 2


def test_a_complete_update_missing_from_the_record_is_recorded_not_rewritten(ws, folder_feed):
    source_dataset(ws, pulls=1)
    [name] = publish(ws, SRC, folder_feed.url).updates
    (ws.meta / layout.cache_dir(SRC, layout.PUBLISHED)).unlink()
    marker = folder_feed.folder / name / "_SUCCESS"
    before = marker.stat().st_mtime_ns
    assert publish(ws, SRC, folder_feed.url).updates == [name]
    assert marker.stat().st_mtime_ns == before
    assert publish(ws, SRC, folder_feed.url).updates == []


def test_csv_format_writes_csv_parts(ws, folder_feed):
    source_dataset(ws, pulls=1)
    [name] = publish(ws, SRC, folder_feed.url, fmt="csv").updates
    part = pacsv.read_csv(folder_feed.folder / name / "part-00000.csv")
    assert part.column("city").to_pylist() == ["Oslo", "Rome"]
    assert part.column("n").to_pylist() == [0, 10]


def test_unknown_format_is_refused(ws, folder_feed):
    source_dataset(ws, pulls=1)
    with pytest.raises(PublishError, match="--format xml"):
        publish(ws, SRC, folder_feed.url, fmt="xml")


def test_round_trip_gives_the_same_records_and_logical_hashes(ws, feed, tmp_path):
    source_dataset(ws, pulls=3)
    publish(ws, SRC, feed.url)
    other = Workspace.init(tmp_path / "consumer")
    add_feed_dataset(other, feed, read={"kind": "parquet"}, dataset_id="copy.events")

    result = pull_root(other, "copy.events")

    assert len(result.blocks) == 3
    mine, theirs = data_blocks(ws, SRC), data_blocks(other, "copy.events")
    assert [b.output_slice.hash for b in theirs] == [b.output_slice.hash for b in mine]

    def records(w, d):
        return [r for f in w.dataset(d).data_files()
                for r in pq.read_table(f).drop_columns(["system_time"]).to_pylist()]

    assert records(other, "copy.events") == records(ws, SRC)


def test_publish_from_the_command_line(ws, folder_feed):
    source_dataset(ws, pulls=1)
    done = coord("publish", SRC, "--to-feed", folder_feed.url, "--format", "csv", cwd=ws.root)
    assert "1 block published" in done.stdout
    assert any(n.endswith("/part-00000.csv") for n in folder_feed.names())
    again = coord("publish", SRC, "--to-feed", folder_feed.url, cwd=ws.root)
    assert "nothing new to publish" in again.stdout


def test_updates_are_named_after_a_newer_update_already_in_the_feed(ws, folder_feed):
    folder_feed.update("20991231.235959", {"part-0.csv": "x\n1\n"})  # another producer's
    source_dataset(ws, pulls=2)
    assert publish(ws, SRC, folder_feed.url).updates == ["21000101.000000", "21000101.000001"]


def test_a_stopped_run_is_finished_under_the_same_names(ws, folder_feed):
    source_dataset(ws, pulls=2)
    first, second = publish(ws, SRC, folder_feed.url).updates
    # stopped after the first update's _SUCCESS, before the second's and before the record
    folder_feed.delete(f"{second}/_SUCCESS")
    (ws.meta / layout.cache_dir(SRC, layout.PUBLISHED)).unlink()
    assert publish(ws, SRC, folder_feed.url).updates == [first, second]
    assert folder_feed.get(f"{second}/_SUCCESS") == b"1"


def test_a_changed_slice_is_never_published(ws, folder_feed):
    source_dataset(ws)
    changed = ws.dataset(SRC).data_files()[-1]
    flip_a_byte(changed)
    with pytest.raises(ChangedSlice, match=f"refusing to read {changed}: physical hash differs"):
        publish(ws, SRC, folder_feed.url)
    assert [p for p in folder_feed.folder.rglob("*") if p.is_file()] == []
