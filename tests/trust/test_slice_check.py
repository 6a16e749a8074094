"""Local slices are checked against their block before they are read, once per file state
(``coordinator.trust.slice_check``); every reader takes its files from there (the readers'
own tests show each refusing a changed file)."""
from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.errors import Conflict
from coordinator.trust import verify
from coordinator.trust.slice_check import ChangedSlice, checked_slices
from coordinator.workspace import Workspace, layout

from ..repository.conftest import make_root
from ..support.tamper import flip_a_byte

DS = "org.example.events"


@pytest.fixture
def checks(monkeypatch) -> list:
    """The files the check reads (the real check, counted)."""
    seen = []
    real = verify.check_data_file

    def counted(path, *args, **kwargs):
        seen.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(verify, "check_data_file", counted)
    return seen


def data_blocks(ds) -> list:
    """(hash, block) of the blocks with a slice, oldest first."""
    return [(h, b) for h, b in reversed(list(ds.blocks())) if b.output_slice is not None]


def cache_file(ws: Workspace):
    return ws.meta / layout.cache_dir(DS, layout.CHECKED_SLICES)


def test_the_files_come_back_in_the_blocks_order(ws):
    ds = make_root(ws, DS, slices=3)
    blocks = data_blocks(ds)
    assert checked_slices(ds, blocks) == [ds.data_file(h) for h, _ in blocks]
    assert checked_slices(ds, blocks[::-1]) == [ds.data_file(h) for h, _ in blocks[::-1]]


def test_the_files_a_commit_installs_are_not_hashed_again_by_the_first_read(ws, checks):
    ds = make_root(ws, DS, slices=2)
    assert set(json.loads(cache_file(ws).read_text())) == {h.hex() for h, _ in data_blocks(ds)}
    checked_slices(ds, data_blocks(ds))
    assert checks == []


def test_a_file_not_known_good_is_hashed_once_and_later_commands_take_the_cache(ws, checks):
    ds = make_root(ws, DS, slices=2)
    cache_file(ws).unlink()  # as in a workspace copied from elsewhere
    checked_slices(ds, data_blocks(ds))
    assert len(checks) == 2
    later = Workspace.open(ws.root).dataset(DS)  # another command: nothing kept in memory
    checked_slices(later, data_blocks(later))
    assert len(checks) == 2
    assert set(json.loads(cache_file(ws).read_text())) == {h.hex() for h, _ in data_blocks(ds)}


def test_a_flipped_byte_is_refused_naming_the_dataset_the_file_and_verify(ws):
    ds = make_root(ws, DS, slices=2)
    blocks = data_blocks(ds)
    checked_slices(ds, blocks)  # found good and remembered: an edit must still be seen
    flip_a_byte(ds.data_file(blocks[1][0]))
    with pytest.raises(ChangedSlice) as refused:
        checked_slices(ds, blocks)
    message = str(refused.value)
    assert message.startswith(f"dataset {DS}: refusing to read {ds.data_file(blocks[1][0])}: "
                              "physical hash differs from the block's")
    assert message.endswith(f"run coord verify {DS} to check the whole dataset")
    assert "\n" not in message and isinstance(refused.value, Conflict)


def test_a_file_replaced_keeping_its_size_and_mtime_is_checked_again(ws, checks):
    ds = make_root(ws, DS, slices=1)
    blocks = data_blocks(ds)
    path = ds.data_file(blocks[0][0])
    checked_slices(ds, blocks)
    before = os.stat(path)
    forged = path.with_name("forged")
    shutil.copyfile(path, forged)
    flip_a_byte(forged)
    os.replace(forged, path)  # a new inode and ctime; size and (below) mtime as before
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # what touch -d does
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with pytest.raises(ChangedSlice, match="physical hash differs"):
        checked_slices(ds, blocks)
    assert len(checks) == 1  # the installed file was known good; the replaced one is not


def test_a_garbled_cache_is_rebuilt(ws, checks):
    ds = make_root(ws, DS, slices=2)
    cache_file(ws).write_bytes(b'{"ab": [1, 2')
    checked_slices(ds, data_blocks(ds))
    assert len(checks) == 2
    assert set(json.loads(cache_file(ws).read_text())) == {h.hex() for h, _ in data_blocks(ds)}


def test_a_missing_file_is_refused(ws):
    ds = make_root(ws, DS, slices=1)
    blocks = data_blocks(ds)
    ds.data_file(blocks[0][0]).unlink()
    with pytest.raises(ChangedSlice, match="data file is missing"):
        checked_slices(ds, blocks)


def test_a_slice_recorded_without_a_physical_hash_is_checked_by_its_logical_hash(ws):
    ds = make_root(ws, DS, slices=1, physical=False)
    blocks = data_blocks(ds)
    path = ds.data_file(blocks[0][0])
    checked_slices(ds, blocks)
    table = pq.read_table(path)
    values = table.column("value").to_pylist()[::-1]  # values reversed: other records, same count
    pq.write_table(table.set_column(2, "value", pa.array(values)), path)
    with pytest.raises(ChangedSlice, match="logical hash differs"):
        checked_slices(ds, blocks)
