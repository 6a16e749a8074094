"""The one append path of a current-ODF dataset folder (``coordinator/store/append.py``): a block
is checked before anything is written, the head moves last by compare-and-swap, and a process
killed at any step leaves the previous head valid and nothing reachable half-written."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store import layout
from coordinator.store.append import CRASH_POINTS, AppendError, DatasetWriter, HeadMoved, checkpoint_of
from coordinator.store.read import ChainBroken, read_head, read_state
from coordinator.store.verify import verify_folder
from coordinator.workspace.lock import DatasetBusy
from tests.support.odf39_datasets import ROOT_KEY, SCHEMA, at, rows, slice_file, write_root

REPO = Path(__file__).resolve().parents[2]
THIRD = [(at(0).replace(year=2025, month=3), "Nairobi", 4_397_073)]


@pytest.fixture
def root(tmp_path):
    return write_root(tmp_path / "cities", tmp_path / "locks", tmp_path / "scratch")


def writer(ds, tmp_path) -> DatasetWriter:
    return DatasetWriter(ds.root, tmp_path / "locks" / "cities.lock")


def third_add_data(tmp_path, prev_offset=4):
    """The next AddData of the root and its data file."""
    path, new_data = slice_file(rows(THIRD), at(30), prev_offset, tmp_path / "scratch")
    return e.AddData(prev_offset=prev_offset, new_data=new_data, new_watermark=THIRD[0][0]), path


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_an_append_moves_the_head_and_the_data_file_into_the_folder(root, tmp_path):
    event, path = third_add_data(tmp_path)
    with writer(root, tmp_path) as w:
        head = w.append(event, system_time=at(30), data=path)
        assert w.state.last_offset == 5 and w.state.head == head
    assert read_head(root.root) == head and not path.exists()
    assert read_state(root.root).slices[-1].slice == event.new_data
    assert verify_folder(root.root) == []


def test_a_block_breaking_a_chain_rule_is_refused_and_nothing_is_written(root, tmp_path):
    event, path = third_add_data(tmp_path, prev_offset=3)
    before = files(root.root)
    refused = pytest.raises(ChainBroken, match=r"^block 5 \(f1620\w+\): prevOffset is 3")
    with writer(root, tmp_path) as w, refused:
        w.append(event, system_time=at(30), data=path)
    assert files(root.root) == before and path.exists()


def test_a_second_seed_is_refused(root, tmp_path):
    with writer(root, tmp_path) as w, pytest.raises(AppendError, match="already holds dataset did:odf:"):
        w.seed(ROOT_KEY, e.DatasetKind.ROOT, at(30))


def test_a_data_file_other_than_the_one_the_block_names_is_refused(root, tmp_path):
    event, path = third_add_data(tmp_path)
    larger = dataclasses.replace(event.new_data, size=event.new_data.size + 1)
    wrong = dataclasses.replace(event, new_data=larger)
    with writer(root, tmp_path) as w, pytest.raises(AppendError, match="not the file the block names"):
        w.append(wrong, system_time=at(30), data=path)
    assert read_head(root.root) == root.blocks[-1]


def test_a_block_naming_an_object_not_stored_and_not_given_is_refused(root, tmp_path):
    event, _ = third_add_data(tmp_path)
    refused = pytest.raises(AppendError, match=r"names data data/f1620\w+, which is not in")
    with writer(root, tmp_path) as w, refused:
        w.append(event, system_time=at(30))


def test_a_checkpoint_carried_on_is_not_given_again(tmp_path):
    base = write_root(tmp_path / "cities", tmp_path / "locks", tmp_path / "scratch")
    state_file = tmp_path / "state"
    state_file.write_bytes(b"source state")
    checkpoint = checkpoint_of(state_file)
    with writer(base, tmp_path) as w:
        w.append(e.AddData(prev_offset=4, new_checkpoint=checkpoint, new_watermark=THIRD[0][0]),
                 system_time=at(30), checkpoint=state_file)
        later = THIRD[0][0].replace(day=2)
        w.append(e.AddData(prev_offset=4, prev_checkpoint=checkpoint.physical_hash, new_checkpoint=checkpoint,
                           new_watermark=later), system_time=at(31))
    assert verify_folder(base.root) == []


def test_the_head_moved_by_another_process_is_a_lost_compare_and_swap(root, tmp_path):
    event, path = third_add_data(tmp_path)
    with writer(root, tmp_path) as w:
        (root.root / layout.HEAD).write_text(str(root.blocks[-2]))  # one that ignored the lock
        with pytest.raises(HeadMoved, match="refs/head moved during the append"):
            w.append(event, system_time=at(30), data=path)


def test_one_writer_at_a_time(root, tmp_path):
    with writer(root, tmp_path), pytest.raises(DatasetBusy):
        writer(root, tmp_path).__enter__()


def test_a_writer_given_the_current_state_takes_it_as_it_is(root, tmp_path):
    state = read_state(root.root)
    with DatasetWriter(root.root, tmp_path / "locks" / "cities.lock", known=state) as w:
        assert w.state is state


def test_a_state_that_is_no_longer_the_head_is_read_again(root, tmp_path):
    state = read_state(root.root)
    event, path = third_add_data(tmp_path)
    with writer(root, tmp_path) as w:
        w.append(event, system_time=at(30), data=path)
    with DatasetWriter(root.root, tmp_path / "locks" / "cities.lock", known=state) as w:
        assert w.state.last_offset == 5


CHILD = """
import sys
from pathlib import Path
from coordinator.metadata.odf39 import events as e
from coordinator.store.append import DatasetWriter
from tests.support.odf39_datasets import at, rows, slice_file
from tests.store.test_append import THIRD
root, scratch = Path(sys.argv[1]), Path(sys.argv[2])
path, new_data = slice_file(rows(THIRD), at(30), 4, scratch)
with DatasetWriter(root, scratch / "lock") as w:
    w.append(e.AddData(prev_offset=4, new_data=new_data, new_watermark=THIRD[0][0]),
             system_time=at(30), data=path)
"""


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_process_killed_at_any_step_leaves_a_valid_head_and_the_next_writer_finishes(root, tmp_path, point):
    child = subprocess.run([sys.executable, "-c", CHILD, str(root.root), str(tmp_path / "child")],
                           cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "COORD_CRASH_AT": point},
                           capture_output=True, text=True)
    assert child.returncode == -9, child.stderr
    moved = point == "odf-head-updated"
    assert read_head(root.root) == (read_state(root.root).head if moved else root.blocks[-1])
    assert verify_folder(root.root) == []
    with writer(root, tmp_path) as w:  # recovers: what no block names is removed
        if not moved:
            event, path = third_add_data(tmp_path)
            w.append(event, system_time=at(30), data=path)
    state = read_state(root.root)
    assert state.last_offset == 5 and verify_folder(root.root) == []
    named = {layout.block_file(b.hash) for b in state.blocks} | {
        layout.data_file(r.slice.physical_hash) for r in state.slices} | {layout.ALIAS, layout.HEAD}
    assert files(root.root) == named


# --- what the writer trusts, verify checks --------------------------------------------------


def appended_with(root, tmp_path, **changes) -> tuple[e.DataSlice, e.DataSlice]:
    """Append the next AddData with its DataSlice changed; (what was recorded, the true one)."""
    event, path = third_add_data(tmp_path)
    recorded = dataclasses.replace(event.new_data, **changes)
    with writer(root, tmp_path) as w:
        w.append(dataclasses.replace(event, new_data=recorded), system_time=at(30), data=path)
    return recorded, event.new_data


def test_records_that_do_not_hash_to_the_recorded_logical_hash_are_reported(root, tmp_path):
    other = read_state(root.root).slices[0].slice.logical_hash
    recorded, true = appended_with(root, tmp_path, logical_hash=other)
    [problem] = verify_folder(root.root)
    assert str(problem) == (f"block 5 ({read_head(root.root)}): {layout.data_file(true.physical_hash)}: "
                            f"its records hash to {true.logical_hash}, the block records {other}")


def test_offsets_other_than_the_recorded_ones_are_reported(root, tmp_path):
    appended_with(root, tmp_path, offset_interval=e.OffsetInterval(start=5, end=6))
    [problem] = verify_folder(root.root)
    assert str(problem).endswith(": offsets 5 to 5, the block records 5 to 6")


def test_an_os_error_while_appending_commits_nothing_and_names_where_the_dataset_stays(tmp_path):
    folder, lock = tmp_path / "cities", tmp_path / "locks" / "cities.lock"
    event, path = third_add_data(tmp_path, prev_offset=None)
    with DatasetWriter(folder, lock) as w:
        w.seed(ROOT_KEY, e.DatasetKind.ROOT, at(0))
        w.append(SCHEMA, system_time=at(1))
    (folder / layout.DATA).write_bytes(b"")  # a file where the data folder goes
    before = files(folder)
    with pytest.raises(AppendError, match=rf"data.*; nothing of this block was committed, {folder} "
                                          rf"stays at block {read_head(folder)}; append again"):
        with DatasetWriter(folder, lock) as w:
            w.append(event, system_time=at(30), data=path)
    assert files(folder) == before
