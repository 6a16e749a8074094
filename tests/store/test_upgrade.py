"""``build.upgrade``: a workspace's ODF 0.18 root, pulled from CSV files over several pulls,
written as a current-ODF dataset folder: it reads back, verifies, holds the same records with
consecutive offsets, keeps the system times and watermarks, and says where it came from."""
from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from coordinator.build.pull import pull_datasets
from coordinator.build.upgrade import ORIGIN_PATH, TargetExists, UpgradeError, upgrade_dataset
from coordinator.ingest import pull_root
from coordinator.metadata.manifest import load_manifest
from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39.adapt import adapt_snapshot
from coordinator.metadata.odf39.from_odf18 import NoCounterpart
from coordinator.metadata.odf39.source import SourceState
from coordinator.store import layout
from coordinator.store.read import read_state
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets
from coordinator.workspace.dataset import DatasetNotFound
from tests.ingest.conftest import add_dataset, write
from tests.support.manifests import derivative_manifest

SOURCE = """
source:
  kind: root
  fetch: {kind: filesGlob, path: "in/*.csv",
          eventTime: {kind: fromPath, pattern: '(\\d{4}-\\d\\d-\\d\\d)\\.csv'}}
  read: {kind: csv, header: true, schema: ["city STRING", "population BIGINT", "area DOUBLE"]}
  merge: {kind: append}
"""
PULLS = [
    {"2025-01-01.csv": "city,population,area\nLisbon,545923,100.05\nOslo,709037,\n"},
    {"2025-02-01.csv": "city,population,area\nSeoul,9586195,605.2\n",
     "2025-02-03.csv": "city,population,area\nToronto,2794356,630.2\nVancouver,,115.18\n"},
    {"2025-03-01.csv": "city,population,area\nNairobi,4397073,696.1\n"},
]
LATER = datetime(2025, 4, 1, tzinfo=UTC)  # a watermark set without new data, after the pulls


def pulled_root(ws: Workspace, name: str = "cities") -> str:
    add_dataset(ws, SOURCE, name)
    for files in PULLS:
        for file, text in files.items():
            write(ws.root / "in" / file, text)
        pull_root(ws, name)
    return name


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    """The 0.18 workspace, and its root ``cities`` upgraded into ``out``."""
    base = tmp_path_factory.mktemp("upgrade")
    ws = Workspace.init(base / "ws")
    pulled_root(ws)
    [outcome] = pull_datasets(ws, ["cities"], set_watermark=LATER)
    assert outcome.error is None and len(outcome.blocks) == 1
    return ws, upgrade_dataset(ws, "cities", base / "out")


def events_of(u) -> list:
    return [b.block.event for b in u.state.blocks]


def test_the_upgraded_folder_reads_back_and_verifies_clean(upgraded):
    _, u = upgraded
    assert u.root.name == "cities" and (u.root / layout.ALIAS).read_text() == "cities"
    assert read_state(u.root).head == u.state.head
    assert verify_folder(u.root) == []


def test_the_chain_is_seed_source_schema_then_one_add_data_per_018_block_then_the_origin(upgraded):
    ws, u = upgraded
    kinds = [type(ev).__name__ for ev in events_of(u)]
    old_blocks = len(ws.dataset("cities").state().chain)  # source, three pulls, the watermark
    assert kinds == ["Seed", "SetPollingSource", "SetDataSchema"] + ["AddData"] * (old_blocks - 1) \
        + ["SetAttachments"]


def test_the_records_are_the_018_records(upgraded):
    ws, u = upgraded
    old = pa.concat_tables(pq.read_table(f) for f in ws.dataset("cities").data_files())
    new = pa.concat_tables(pq.read_table(u.root / layout.data_file(s.slice.physical_hash))
                           for s in u.state.slices)
    old = old.drop_columns(["system_time"])
    new = new.drop_columns(["offset", "op", "system_time"])
    old = old.set_column(0, "event_time", old["event_time"].cast(pa.timestamp("ms", "UTC")))
    order = [("event_time", "ascending"), ("city", "ascending")]
    assert new.column_names == old.column_names
    assert new.sort_by(order).to_pylist() == old.sort_by(order).to_pylist()
    assert new.num_rows == u.records == 6


def test_offsets_count_up_from_zero_across_the_slices(upgraded):
    _, u = upgraded
    offsets = [pq.read_table(u.root / layout.data_file(s.slice.physical_hash))["offset"]
               for s in u.state.slices]
    assert pa.chunked_array(offsets).to_pylist() == list(range(6))
    assert [(s.slice.offset_interval.start, s.slice.offset_interval.end)
            for s in u.state.slices] == [(0, 1), (2, 4), (5, 5)]


def test_every_record_is_an_append_at_its_018_block_system_time(upgraded):
    ws, u = upgraded
    old = ws.dataset("cities").state().data_blocks
    assert [s.system_time for s in u.state.slices] == [b.system_time for b in old]
    for s, b in zip(u.state.slices, old, strict=True):
        table = pq.read_table(u.root / layout.data_file(s.slice.physical_hash))
        assert pc.unique(table["op"]).to_pylist() == [0]
        ms = b.system_time.replace(microsecond=b.system_time.microsecond // 1000 * 1000)
        assert pc.unique(table["system_time"]).to_pylist() == [ms]


def test_watermarks_are_carried_including_one_set_without_data(upgraded):
    _, u = upgraded
    marks = [ev.new_watermark for ev in events_of(u) if isinstance(ev, e.AddData)]
    assert marks == [datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 3, tzinfo=UTC),
                     datetime(2025, 3, 1, tzinfo=UTC), LATER]
    assert u.state.watermark == LATER


def test_the_source_says_what_the_018_source_says(upgraded):
    ws, u = upgraded
    [source] = [ev for ev in events_of(u) if isinstance(ev, e.SetPollingSource)]
    back = adapt_snapshot(e.DatasetSnapshot(name="cities", kind=e.DatasetKind.ROOT,
                                            metadata=[source])).snapshot.source
    assert back == ws.dataset("cities").state().source


def test_the_schema_is_that_of_the_stored_table(upgraded):
    _, u = upgraded
    ms_utc = d.DataTypeTimestamp(unit=d.TimeUnit.MILLISECOND, timezone="UTC")
    assert [(f.name, f.type) for f in u.state.schema.schema.fields] == [
        ("offset", d.DataTypeInt64()), ("op", d.DataTypeInt32()), ("system_time", ms_utc),
        ("event_time", ms_utc), ("city", d.DataTypeOption(inner=d.DataTypeString())),
        ("population", d.DataTypeOption(inner=d.DataTypeInt64())),
        ("area", d.DataTypeOption(inner=d.DataTypeFloat64()))]


def test_the_origin_attachment_names_the_018_head_and_maps_each_block(upgraded):
    ws, u = upgraded
    [attachment] = [ev for ev in events_of(u) if isinstance(ev, e.SetAttachments)]
    [item] = attachment.attachments.items
    origin = json.loads(item.content)
    old = ws.dataset("cities").state()
    assert item.path == ORIGIN_PATH
    assert origin["upgradedFrom"] == {"odf": "0.18", "dataset": "cities", "head": old.head.hex()}
    add_data = [b.hash for b in u.state.blocks if isinstance(b.block.event, e.AddData)]
    assert origin["blocks"] == [{"odf018": h.hex(), "odf039": str(n)}
                                for h, n in zip([cb.hash for cb in reversed(old.chain[:-1])],
                                                add_data, strict=True)]


def test_upgrading_again_writes_the_same_chain_and_another_name_another_id(upgraded, tmp_path):
    ws, u = upgraded
    again = upgrade_dataset(ws, "cities", tmp_path)
    assert (again.state.id, again.state.head) == (u.state.id, u.state.head)
    pulled_root(ws, "towns")
    assert upgrade_dataset(ws, "towns", tmp_path).state.id != u.state.id


def test_an_existing_target_is_refused_and_left_as_it_was(upgraded):
    ws, u = upgraded
    before = sorted(p.name for p in u.root.parent.iterdir())
    with pytest.raises(TargetExists, match=r"out/cities exists; upgrade into another folder"):
        upgrade_dataset(ws, "cities", u.root.parent)
    assert sorted(p.name for p in u.root.parent.iterdir()) == before
    assert verify_folder(u.root) == []


def test_an_unknown_dataset_is_refused(ws, tmp_path):
    with pytest.raises(DatasetNotFound, match="dataset nope does not exist"):
        upgrade_dataset(ws, "nope", tmp_path / "out")
    assert not (tmp_path / "out" / "nope").exists()


def test_a_derivative_whose_input_is_not_upgraded_is_refused(ws, tmp_path):
    add_dataset(ws, SOURCE, "c")
    (ws.root / "d.yaml").write_text(derivative_manifest("d", ["c"], "SELECT * FROM c"))
    add_datasets(ws, [load_manifest(ws.root / "d.yaml")])
    with pytest.raises(UpgradeError, match=r"^d reads c, which is not upgraded in .*/out; "
                                           r"upgrade it first \(or give -r\)$"):
        upgrade_dataset(ws, "d", tmp_path / "out")


def test_a_source_option_0_39_cannot_say_is_refused_by_its_place(ws, tmp_path):
    add_dataset(ws, SOURCE.replace("header: true", "header: true, multiLine: true"), "c")
    with pytest.raises(NoCounterpart, match=r"^c: source\.read\.multiLine: the csv option "
                                            r"multiLine has no counterpart in ODF 0\.39"):
        upgrade_dataset(ws, "c", tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_url_sources_fetch_state_becomes_the_references_last_modified(ws, tmp_path):
    csv = write(tmp_path / "cities.csv", "city,population,area\nOslo,709037,454.0\n")
    os.utime(csv, ns=(1_700_000_000_123_000_000, 1_700_000_000_123_000_000))
    glob = SOURCE[SOURCE.index("  fetch:"):SOURCE.index("  read:")]
    add_dataset(ws, SOURCE.replace(glob, f'  fetch: {{kind: url, url: "{csv.as_uri()}"}}\n'), "c")
    pull_root(ws, "c")
    u = upgrade_dataset(ws, "c", tmp_path / "out")
    assert u.state.source_state == SourceState(source_name="default", kind="odf/last-modified",
                                               value="2023-11-14T22:13:20.123Z")
    assert verify_folder(u.root) == []
