"""A ``fileFeed`` root in a workspace of either ODF version, through the command line: the
scenarios of ``test_consume.py`` that read the same in both (parametrized by ``consumer``), and
what is a current-ODF (0.39) root's own (``store.feed_source``): no source in its chain, each
block naming its update in ``newSourceState``, the chain standing for a lost fetch state, a
pushed copy the reference can read, corrections from a snapshot merge.

Expected records are written by hand; stored ones are read with pyarrow from the slices."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace import layout as ws_layout
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord_here
from ..support.odf39_datasets import BATCHES, append_rows, write_root
from .conftest import Feed, csv_part, feed_source

DS = "feed.ds"


@dataclass
class Consumer:
    """A workspace of ``ws.config().odf`` with the feed root ``DS``, used as a user does."""

    ws: Workspace

    @property
    def current(self) -> bool:
        return self.ws.config().odf is OdfVersion.V039

    def add(self, feed: Feed, *, replace: bool = False, **options) -> None:
        """``coord add`` of ``DS`` reading ``feed`` (``options``: ``feed_source``'s)."""
        self.define(feed_source(feed, **options), replace=replace)

    def define(self, source: dict, *, replace: bool = False,
               check: bool = True) -> subprocess.CompletedProcess:
        path = self.ws.root / f"{DS}.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": 1, "kind": "DatasetSnapshot",
                                        "content": {"id": DS, "source": source}}, sort_keys=False))
        return coord_here("add", str(path), *(["--replace"] if replace else []), cwd=self.ws.root,
                          check=check)

    def pull(self) -> str:
        return coord_here("pull", DS, cwd=self.ws.root).stdout.strip()

    def blocks(self) -> list[tuple[str, Path]]:
        """Each block with data, oldest first: (the block's state file, its data file)."""
        if self.current:
            ds = CurrentDataset(self.ws, DS)
            return [(ds.state_path(r.block_hash), ds.data_file(r.slice)) for r in ds.state().slices]
        old = self.ws.dataset(DS)
        return [(old.state_path(h), old.data_file(h)) for h, b in reversed(list(old.blocks()))
                if b.output_slice]

    def values(self) -> list[tuple[str, int]]:
        return [(r["name"], r["value"]) for _, f in self.blocks()
                for r in pq.read_table(f, columns=["name", "value"]).to_pylist()]

    def updates(self) -> list[str]:
        """The update each block with data was read from, as its stored fetch state says."""
        return [json.loads(state.read_text())["update"] for state, _ in self.blocks()]


@pytest.fixture(params=[OdfVersion.V018, OdfVersion.V039], ids=["odf0.18", "odf0.39"])
def consumer(request, tmp_path) -> Consumer:
    return Consumer(Workspace.init(tmp_path / "consumer", request.param))


@pytest.fixture
def current(tmp_path) -> Consumer:
    return Consumer(Workspace.init(tmp_path / "consumer", OdfVersion.V039))


def test_complete_updates_are_ingested_oldest_first_one_block_each(consumer, feed):
    feed.update("20240102.000000", {"part-0.csv": csv_part(("c", 3))})
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1)), "part-1.csv": csv_part(("b", 2))})
    consumer.add(feed)
    assert consumer.pull() == f"{DS}: 3 new records in 2 blocks"
    assert consumer.values() == [("a", 1), ("b", 2), ("c", 3)]
    assert consumer.updates() == ["20240101.000000", "20240102.000000"]


def test_only_updates_newer_than_the_last_ingested_are_taken(consumer, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    consumer.add(folder_feed)
    consumer.pull()
    assert consumer.pull() == f"{DS}: up to date"
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    assert consumer.pull() == f"{DS}: 1 new record"
    assert consumer.values() == [("a", 1), ("b", 2)]


def test_an_update_listing_fewer_files_than_success_says_waits_then_is_taken(consumer, folder_feed):
    folder_feed.put("20240101.000000/part-0.csv", csv_part(("a", 1)))
    folder_feed.put("20240101.000000/_SUCCESS", "2")
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("c", 3))})
    consumer.add(folder_feed)
    assert consumer.pull() == (f"{DS}: up to date; 20240101.000000/: incomplete (_SUCCESS says 2 "
                               "files, 1 listed so far); waiting for it")
    folder_feed.put("20240101.000000/part-1.csv", csv_part(("b", 2)))
    assert consumer.pull() == f"{DS}: 3 new records in 2 blocks"
    assert consumer.values() == [("a", 1), ("b", 2), ("c", 3)]


def test_an_invalidated_update_is_reported_and_never_ingested(consumer, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    folder_feed.put("20240101.000000/extra", b"")
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    consumer.add(folder_feed)
    assert consumer.pull() == (f"{DS}: 1 new record; 20240101.000000/: invalidated (2 files listed, "
                               "_SUCCESS says 1); not ingested")
    assert consumer.values() == [("b", 2)]


def test_a_partitioned_feed_takes_each_partitions_latest_valid_update(consumer, folder_feed):
    folder_feed.update("2024-01-01/20240102.000000", {"p.csv": csv_part(("jan1-first", 1))})
    folder_feed.update("2024-01-01/20240103.000000", {"p.csv": csv_part(("jan1-rerun", 2))})
    folder_feed.update("2024-01-02/20240103.120000", {"p.csv": csv_part(("jan2", 4))})
    consumer.add(folder_feed, partitions=1)
    consumer.pull()
    assert consumer.values() == [("jan1-rerun", 2), ("jan2", 4)]
    assert consumer.updates() == ["2024-01-01/20240103.000000", "2024-01-02/20240103.120000"]
    assert consumer.pull() == f"{DS}: up to date"  # the superseded update is settled, not "older"


def test_status_lists_the_updates_a_pull_would_take(consumer, feed):
    feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    consumer.add(feed)
    consumer.pull()
    feed.update("20240102.000000", {"p0.csv": csv_part(("b", 1)), "p1.csv": csv_part(("c", 1))})
    status = coord_here("status", DS, cwd=consumer.ws.root).stdout
    assert "20240102.000000/ (2 files)" in status and "20240101" not in status


def test_lineage_shows_the_feed_as_the_roots_origin(consumer, folder_feed):
    consumer.add(folder_feed)
    [node] = json.loads(coord_here("lineage", DS, "-o", "json", cwd=consumer.ws.root).stdout)["nodes"]
    assert node["origin"] == folder_feed.url


def test_field_lineage_says_a_roots_columns_are_fetched_from_the_feed(consumer, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    consumer.add(folder_feed)
    consumer.pull()
    answer = json.loads(coord_here("lineage", DS, "--field", "name", "-o", "json",
                                   cwd=consumer.ws.root).stdout)
    assert answer["roots"] == {f"{DS}.name": f"fetched from {folder_feed.url}, read as csv"}


# --- a current-ODF (0.39) root's own ----------------------------------------------------------


def chain(consumer: Consumer) -> list[e.MetadataEvent]:
    return [b.block.event for b in CurrentDataset(consumer.ws, DS).state().blocks]


def test_the_chain_holds_no_source_and_each_block_names_its_update(current, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    current.add(folder_feed)
    current.pull()
    events = chain(current)
    assert [type(event).__name__ for event in events] == ["Seed", "SetDataSchema", "AddData", "AddData"]
    recorded = [event.new_source_state for event in events[2:]]
    assert [(s.source_name, s.kind, s.value) for s in recorded] == [
        ("fileFeed", "coord/file-feed", "20240101.000000"),
        ("fileFeed", "coord/file-feed", "20240102.000000")]
    kept = current.ws.meta / ws_layout.cache_dir(DS, "file-feed.json")
    assert json.loads(kept.read_text())["source"]["fetch"] == {"kind": "fileFeed", "url": folder_feed.url}


def test_a_current_form_manifest_names_the_feed_and_it_is_kept_beside_the_chain(current, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    path = current.ws.root / f"{DS}.yaml"
    path.write_text(yaml.safe_dump({"kind": "DatasetSnapshot", "version": 1, "content": {
        "name": DS, "kind": "Root", "metadata": [
            {"kind": "SetPollingSource",
             "fetch": {"kind": "FileFeed", "url": folder_feed.url, "successMarker": "Count"},
             "read": {"kind": "Csv", "header": True, "ddlSchema": ["name STRING", "value BIGINT"]},
             "merge": {"kind": "Append"}},
            {"kind": "SetInfo", "description": "a feed"}]}}, sort_keys=False))
    coord_here("add", str(path), cwd=current.ws.root)
    assert current.pull() == f"{DS}: 1 new record"
    assert [type(event).__name__ for event in chain(current)] == [
        "Seed", "SetInfo", "SetDataSchema", "AddData"]
    kept = current.ws.meta / ws_layout.cache_dir(DS, "file-feed.json")
    assert json.loads(kept.read_text())["source"]["fetch"] == {
        "kind": "fileFeed", "url": folder_feed.url, "successMarker": "count"}
    assert current.values() == [("a", 1)]


def test_a_lost_fetch_state_is_read_back_from_the_chain(current, folder_feed):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    current.add(folder_feed)
    current.pull()
    shutil.rmtree(current.ws.meta / ws_layout.cache_dir(DS))  # the kept source and the fetch states
    assert coord_here("pull", DS, cwd=current.ws.root, check=False).returncode == 1  # nothing to fetch
    current.add(folder_feed, replace=True)
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    assert current.pull() == f"{DS}: 1 new record"
    assert current.values() == [("a", 1), ("b", 2)]  # the first update not taken twice


def test_a_damaged_kept_source_fails_the_pull_in_one_line_saying_what_to_do(current, folder_feed):
    current.add(folder_feed)
    kept = current.ws.meta / ws_layout.cache_dir(DS, "file-feed.json")
    kept.write_text("{")
    done = coord_here("pull", DS, cwd=current.ws.root, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith(f"coord: error: {DS}: {kept} is not the File Feed source coord keeps")
    assert done.stderr.rstrip().endswith("add the dataset's manifest again (coord add --replace)")
    assert done.stderr.count("\n") == 1
    current.add(folder_feed, replace=True)
    assert current.pull() == f"{DS}: up to date"


def test_a_glob_root_cannot_become_a_feed_root_and_a_feed_root_can_become_a_glob_one(current, folder_feed):
    current.ws.root.joinpath("in").mkdir()
    glob = {**feed_source(folder_feed), "fetch": {"kind": "filesGlob", "path": "in/*.csv"}}
    current.define(glob)
    refused = current.define(feed_source(folder_feed), replace=True, check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"coord: error: dataset {DS}: its chain has a polling source, "
                                     "which ODF 0.39 cannot end")
    coord_here("delete", DS, "--yes", cwd=current.ws.root)
    current.add(folder_feed)
    current.define(glob, replace=True)  # a SetPollingSource, the kept feed source dropped
    assert type(chain(current)[-1]).__name__ == "SetPollingSource"
    assert not (current.ws.meta / ws_layout.cache_dir(DS, "file-feed.json")).exists()


def test_a_snapshot_merge_writes_each_updates_changes_as_operation_types(current, folder_feed):
    folder_feed.update("20240101.000000", {"p0.csv": csv_part(("a", 1)), "p1.csv": csv_part(("b", 2))})
    folder_feed.update("20240102.000000", {"p0.csv": csv_part(("b", 5))})
    current.add(folder_feed, merge={"kind": "snapshot", "primaryKey": ["name"]})
    current.pull()
    ops = [(r["op"], r["name"], r["value"]) for _, f in current.blocks()
           for r in pq.read_table(f, columns=["op", "name", "value"]).to_pylist()]
    # the second update as a whole: "a" is gone (retracted), "b" changed (correct-from, -to)
    assert sorted(ops[:2]) == [(0, "a", 1), (0, "b", 2)]
    assert sorted(ops[2:]) == [(1, "a", 1), (2, "b", 2), (3, "b", 5)]


def test_a_pushed_copy_is_a_root_without_source_that_verifies(current, folder_feed, tmp_path):
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    current.add(folder_feed)
    current.pull()
    url = (tmp_path / "repo").as_uri()
    coord_here("repo", "add", "shared", url, cwd=current.ws.root)
    coord_here("push", DS, "--to", "shared", cwd=current.ws.root)
    copy = Consumer(Workspace.init(tmp_path / "copy", OdfVersion.V039))
    coord_here("repo", "add", "shared", url, cwd=copy.ws.root)
    coord_here("pull", f"shared/{DS}", cwd=copy.ws.root)
    assert coord_here("verify", "--integrity", DS, cwd=copy.ws.root).returncode == 0
    state = CurrentDataset(copy.ws, DS).state()
    assert state.polling_source is None and state.push_sources == ()
    assert copy.values() == [("a", 1)]


def test_an_upgraded_0_18_feed_root_records_its_updates_and_goes_on_from_them_once_added_again(
        folder_feed, tmp_path):
    old = Consumer(Workspace.init(tmp_path / "old", OdfVersion.V018))
    folder_feed.update("20240101.000000", {"part-0.csv": csv_part(("a", 1))})
    old.add(folder_feed)
    old.pull()
    new = Consumer(Workspace.init(tmp_path / "new", OdfVersion.V039))
    into = new.ws.meta / "datasets"  # the upgraded folder as the 0.39 workspace's dataset
    said = coord_here("upgrade", DS, "--into", str(into), cwd=old.ws.root).stdout
    assert said.rstrip().endswith("the folder holds no File Feed source, only the updates its "
                                  "blocks took: add the manifest (coord add --replace) in the "
                                  "workspace that holds it to go on from them")
    events = chain(new)
    assert [type(event).__name__ for event in events] == [
        "Seed", "SetDataSchema", "AddData", "SetAttachments"]
    recorded = events[2].new_source_state
    assert (recorded.source_name, recorded.kind, recorded.value) == (
        "fileFeed", "coord/file-feed", "20240101.000000")
    new.add(folder_feed, replace=True)
    folder_feed.update("20240102.000000", {"part-0.csv": csv_part(("b", 2))})
    assert new.pull() == f"{DS}: 1 new record"
    assert new.values() == [("a", 1), ("b", 2)]


def test_an_0_18_root_whose_source_changed_to_a_file_feed_is_refused_by_upgrade_in_one_line(
        folder_feed, tmp_path):
    old = Consumer(Workspace.init(tmp_path / "old", OdfVersion.V018))
    old.ws.root.joinpath("in").mkdir()
    old.define({**feed_source(folder_feed), "fetch": {"kind": "filesGlob", "path": "in/*.csv"}})
    old.add(folder_feed, replace=True)
    refused = coord_here("upgrade", DS, "--into", "../out", cwd=old.ws.root, check=False)
    assert refused.returncode == 1
    assert refused.stderr == (f"coord: error: {DS}: its source changes between a File Feed and "
                              "another fetch along the chain, which a 0.39 chain cannot say (it "
                              "ends no polling source); upgrade a dataset that keeps one of them "
                              "(coord reset to a block before the change, or the feed added under "
                              "another name)\n")


def test_a_published_0_39_dataset_is_read_back_with_its_retractions_by_a_0_39_feed_root(
        current, folder_feed, tmp_path):
    producer = Workspace.init(tmp_path / "producer", OdfVersion.V039)
    folder, locks, scratch = producer.meta / "datasets" / "cities", producer.meta / "locks", tmp_path / "s"
    write_root(folder, locks, scratch)
    append_rows(folder, locks, scratch, BATCHES[0][:1], op=1)  # Lisbon retracted
    coord_here("publish", "cities", "--to-feed", folder_feed.url, cwd=producer.root)
    current.add(folder_feed, read={"kind": "parquet"})
    current.pull()
    columns = ["op", "event_time", "city", "population"]
    ds = CurrentDataset(producer, "cities")
    theirs = [pq.read_table(ds.data_file(r.slice), columns=columns).to_pylist() for r in ds.state().slices]
    ours = [pq.read_table(f, columns=columns).to_pylist() for _, f in current.blocks()]
    assert ours == theirs
    assert [r["op"] for r in ours[-1]] == [1]  # the part's op column read as the operation type
