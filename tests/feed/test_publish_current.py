"""`coord publish` of a current-ODF (0.39) dataset: each slice becomes a File Feed update whose
part holds its records without offset and system time (and without op when every record is an
append; a part with retractions keeps op and ``_coord.json`` names it), named in
``_coord.json`` by its block's multihash with its offsets; a 0.18 ``fileFeed`` root reads the
same records back.
Expected records are read from the 0.39 slices with pyarrow."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.ingest import pull_root
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import BATCHES, append_rows, write_root
from .conftest import Feed, add_feed_dataset

DATA = ["event_time", "city", "population"]


@pytest.fixture
def ws(tmp_path) -> Workspace:
    ws = Workspace.init(tmp_path / "producer", OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    return ws


def publish(ws: Workspace, feed: Feed, check: bool = True):
    return coord("publish", "cities", "--to-feed", feed.url, cwd=ws.root, check=check)


def slice_records(ws: Workspace) -> list[pa.Table]:
    ds = CurrentDataset(ws, "cities")
    return [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]


def test_each_slice_is_an_update_named_by_its_block_with_its_offsets(ws, folder_feed):
    out = publish(ws, folder_feed).stdout
    assert f"cities: {len(BATCHES)} blocks published to {folder_feed.url}" in out
    names = sorted({n.split("/")[0] for n in folder_feed.names()})
    slices = CurrentDataset(ws, "cities").state().slices
    for name, record, stored in zip(names, slices, slice_records(ws), strict=True):
        manifest = json.loads(folder_feed.get(f"{name}/_coord.json"))
        [entry] = manifest["slices"]
        assert manifest["blocks"] == [str(record.block_hash)] == [entry["block"]]
        interval = record.slice.offset_interval
        assert entry["offsets"] == [interval.start, interval.end]
        assert entry["numRecords"] == stored.num_rows
        assert entry["logicalHash"] == str(record.slice.logical_hash)
        part = pq.read_table(folder_feed.folder / name / entry["file"])
        assert part.column_names == DATA
        assert part.equals(stored.select(DATA))


def test_publishing_again_writes_nothing(ws, folder_feed):
    publish(ws, folder_feed)
    files = folder_feed.names()
    assert "nothing new to publish" in publish(ws, folder_feed).stdout
    assert folder_feed.names() == files


def test_a_0_18_feed_root_reads_the_same_records_back(ws, folder_feed, tmp_path):
    publish(ws, folder_feed)
    other = Workspace.init(tmp_path / "consumer")
    add_feed_dataset(other, folder_feed, read={"kind": "parquet"}, dataset_id="copy.cities")
    assert len(pull_root(other, "copy.cities").blocks) == len(BATCHES)
    theirs = [pq.read_table(other.dataset("copy.cities").data_file(h))
              for h, b in reversed(list(other.dataset("copy.cities").blocks())) if b.output_slice]
    assert [t.select(DATA).to_pylist() for t in theirs] == \
        [t.select(DATA).to_pylist() for t in slice_records(ws)]


def test_a_slice_with_retractions_keeps_its_op_column_and_says_so(ws, folder_feed):
    publish(ws, folder_feed)
    retracted = BATCHES[0][:1]
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", retracted, op=1)
    publish(ws, folder_feed)
    names = sorted({n.split("/")[0] for n in folder_feed.names()})
    assert len(names) == len(BATCHES) + 1 and all(f"{n}/_SUCCESS" in folder_feed.names() for n in names)
    *appends, last = [json.loads(folder_feed.get(f"{n}/_coord.json"))["slices"][0] for n in names]
    assert last["operationTypeColumn"] == "op"
    assert not any("operationTypeColumn" in entry for entry in appends)
    part = pq.read_table(folder_feed.folder / names[-1] / last["file"])
    assert part.column_names == [*DATA, "op"]
    assert part.to_pylist() == [{"event_time": t, "city": c, "population": p, "op": 1}
                                for t, c, p in retracted]
    assert part.equals(slice_records(ws)[-1].select([*DATA, "op"]))
    first = pq.read_table(folder_feed.folder / names[0] / appends[0]["file"])
    assert first.column_names == DATA  # a part of appends alone has no op column
