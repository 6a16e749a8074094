"""`coord provenance` on current-ODF (0.39) datasets: what is refused in one line before any
engine is needed (a block that ran no transform, an offset no block holds, offsets of two
blocks, --offset on a 0.18 dataset). The answers themselves: test_current_provenance.py."""
from __future__ import annotations

import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import Written, write_derivative, write_root


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    home = tmp_path_factory.mktemp("current-provenance-arguments")
    ws = Workspace.init(home, OdfVersion.V039)
    root = write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch")
    write_derivative(ws.meta / "datasets" / "large-cities", ws.meta / "locks", home / "d",
                     Written(root.root, root.id, root.blocks, root.data, ()))
    return ws


def refused(ws: Workspace, *args: str) -> str:
    proc = coord("provenance", *args, cwd=ws.root, check=False, fake_engine=True)
    assert proc.returncode == 1, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def test_a_root_block_is_refused(ws):
    block = CurrentDataset(ws, "cities").state().slices[0].block_hash
    assert "ran no transform" in refused(ws, "cities", "--block", str(block))


def test_an_offset_no_slice_holds_is_refused(ws):
    assert "no slice of large-cities holds them" in refused(ws, "large-cities", "--offset", "99")


def test_offsets_of_two_blocks_are_refused(ws):
    slices = CurrentDataset(ws, "large-cities").state().slices
    a, b = (str(s.slice.offset_interval.start) for s in slices)
    assert "in several blocks" in refused(ws, "large-cities", "--offset", a, "--offset", b)


def test_an_offset_outside_the_named_block_is_refused(ws):
    first, second = CurrentDataset(ws, "large-cities").state().slices
    message = refused(ws, "large-cities", "--block", str(first.block_hash),
                      "--offset", str(second.slice.offset_interval.start))
    held = first.slice.offset_interval
    assert f"holds offsets {held.start} to {held.end}" in message


def test_a_block_named_by_its_digest_prefix_is_found(ws):
    first = CurrentDataset(ws, "cities").state().slices[0]
    message = refused(ws, "cities", "--block", first.block_hash.digest.hex()[:8])
    assert f"block {first.sequence_number} ({first.block_hash}) of cities ran no transform" in message


def test_offsets_of_a_0_18_dataset_are_refused(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    (tmp_path / "m.yaml").write_text(
        "apiVersion: 1\nkind: DatasetSnapshot\ncontent:\n  id: r\n  source:\n    kind: root\n"
        "    fetch: {kind: url, url: 'file:///nonexistent.csv'}\n"
        "    read: {kind: csv, header: true, schema: ['event_time TIMESTAMP', 'x BIGINT']}\n"
        "    merge: {kind: append}\n")
    coord("add", str(tmp_path / "m.yaml"), cwd=tmp_path)
    proc = coord("provenance", "r", "--block", "00", "--offset", "1", cwd=tmp_path, check=False)
    assert proc.returncode == 1 and "whose records have no offsets" in proc.stderr
