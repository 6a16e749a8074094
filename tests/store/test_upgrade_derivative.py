"""``build.upgrade`` of a derivative: its SetTransform names the upgraded input by ``did:odf``,
each ExecuteTransform names the input's upgraded blocks and offsets the 0.18 step consumed,
and its checkpoints are packed one file each, the same bytes for the same files."""
from __future__ import annotations

import io
import json
import os
import tarfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.build.upgrade import UpgradeError, upgrade_dataset, upgrade_order
from coordinator.ingest import pull_root
from coordinator.metadata.manifest import load_manifest
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39.source import SqlQueryStep
from coordinator.store import layout
from coordinator.store.checkpoint import pack_checkpoint
from coordinator.store.verify import verify_folder
from coordinator.transform.execute import pull_derivative
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets
from tests.ingest.conftest import add_dataset, write
from tests.store.test_upgrade import PULLS, SOURCE
from tests.support.fake_engine import FakeEngine
from tests.support.manifests import derivative_manifest

QUERY = "SELECT event_time, city, population FROM cities WHERE population > 1000000"


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    """``large`` over ``cities``, run after the first pull and after the last two; both
    upgraded into ``out``, the input first."""
    base = tmp_path_factory.mktemp("derivative")
    ws = Workspace.init(base / "ws")
    add_dataset(ws, SOURCE, "cities")
    (ws.root / "large.yaml").write_text(derivative_manifest("large", ["cities"], QUERY))
    add_datasets(ws, [load_manifest(ws.root / "large.yaml")])
    for n, files in enumerate(PULLS):
        for file, text in files.items():
            write(ws.root / "in" / file, text)
        pull_root(ws, "cities")
        if n != 1:
            pull_derivative(ws, "large", lambda: FakeEngine(base / "engine-run"))
    order = upgrade_order(ws, ["large"], base / "out", recursive=True)
    assert order == ["cities", "large"]
    cities, large = (upgrade_dataset(ws, name, base / "out") for name in order)
    return ws, cities, large


def steps(u) -> list[e.ExecuteTransform]:
    return [b.block.event for b in u.state.blocks if isinstance(b.block.event, e.ExecuteTransform)]


def test_the_upgraded_derivative_verifies_and_reads_its_input_by_did(upgraded):
    _, cities, large = upgraded
    assert verify_folder(large.root) == []
    assert large.state.kind is e.DatasetKind.DERIVATIVE
    assert large.state.transform.inputs == [e.TransformInput(dataset_ref=str(cities.state.id),
                                                             alias="cities")]
    assert large.state.transform.transform.queries == [SqlQueryStep(query=QUERY)]  # normalized


def test_its_records_are_the_018_records(upgraded):
    ws, _, large = upgraded
    old = pa.concat_tables(pq.read_table(f) for f in ws.dataset("large").data_files())
    new = pa.concat_tables(pq.read_table(large.root / layout.data_file(s.slice.physical_hash))
                           for s in large.state.slices)
    assert sorted(new["city"].to_pylist()) == sorted(old["city"].to_pylist()) == [
        "Nairobi", "Seoul", "Toronto"]


def test_each_step_names_the_upgraded_input_blocks_and_offsets_it_consumed(upgraded):
    _, cities, large = upgraded
    add_data = cities.state.slices  # one per pull, offsets 0-1, 2-4, 5
    first, second = steps(large)
    [i1], [i2] = first.query_inputs, second.query_inputs
    assert (i1.prev_block_hash, i1.new_block_hash, i1.prev_offset, i1.new_offset) == (
        None, add_data[0].block_hash, None, 1)
    assert (i2.prev_block_hash, i2.new_block_hash, i2.prev_offset, i2.new_offset) == (
        add_data[0].block_hash, add_data[2].block_hash, 1, 5)
    assert i1.dataset_id == i2.dataset_id == cities.state.id


def test_each_checkpoint_is_the_018_checkpoint_folder_packed(upgraded, tmp_path):
    ws, _, large = upgraded
    executed = [old for old, new in large.origin
                if any(new == b.hash and isinstance(b.block.event, e.ExecuteTransform)
                       for b in large.state.blocks)]
    for old, step in zip(executed, steps(large), strict=True):
        pack_checkpoint(ws.dataset("large").checkpoint_dir(old), tmp_path / "packed")
        stored = large.root / layout.checkpoint_file(step.new_checkpoint.physical_hash)
        assert stored.read_bytes() == (tmp_path / "packed").read_bytes()
    assert steps(large)[1].prev_checkpoint == steps(large)[0].new_checkpoint.physical_hash


def test_a_packed_checkpoint_depends_only_on_the_files(tmp_path):
    for name, when in (("a", 1_000_000), ("b", 2_000_000)):
        folder = tmp_path / name
        (folder / "state").mkdir(parents=True)
        (folder / "state" / "x.json").write_text('{"w": 1}')
        (folder / "meta").write_text("m")
        for p in (folder / "state" / "x.json", folder / "meta"):
            os.utime(p, (when, when))
        pack_checkpoint(folder, tmp_path / f"{name}.tar")
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(fileobj=io.BytesIO((tmp_path / "a.tar").read_bytes())) as tar:
        assert tar.getnames() == ["meta", "state", "state/x.json"]
        assert json.loads(tar.extractfile("state/x.json").read()) == {"w": 1}


def test_an_input_upgraded_before_a_step_read_it_is_refused(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    add_dataset(ws, SOURCE, "cities")
    (ws.root / "large.yaml").write_text(derivative_manifest("large", ["cities"], QUERY))
    add_datasets(ws, [load_manifest(ws.root / "large.yaml")])
    for n, files in enumerate(PULLS[:2]):
        for file, text in files.items():
            write(ws.root / "in" / file, text)
        pull_root(ws, "cities")
        if n == 0:
            upgrade_dataset(ws, "cities", tmp_path / "out")  # before the second pull
    pull_derivative(ws, "large", lambda: FakeEngine(tmp_path / "engine-run"))
    newest = ws.dataset("cities").head().hex()
    with pytest.raises(UpgradeError, match=f"^large read block {newest} of cities, which its "
                                           "upgrade does not hold; upgrade cities again"):
        upgrade_dataset(ws, "large", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cities"]
