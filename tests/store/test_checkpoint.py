"""A checkpoint folder packed as one file and unpacked again (``store/checkpoint.py``): the file
is the block's (size and hash) before a byte of it is parsed, and it unpacks only inside the
folder it is given."""
from __future__ import annotations

import io
import tarfile

import pytest

from coordinator.store.append import checkpoint_of
from coordinator.store.checkpoint import CheckpointError, pack_checkpoint, unpack_checkpoint


@pytest.fixture
def folder(tmp_path):
    state = tmp_path / "state"
    (state / "offsets").mkdir(parents=True)
    (state / "offsets" / "0").write_text("v1\n{}\n")
    (state / "metadata").write_text('{"id": "x"}')
    return state


def test_a_packed_folder_unpacks_to_the_same_files(folder, tmp_path):
    pack_checkpoint(folder, tmp_path / "packed")
    out = unpack_checkpoint(tmp_path / "packed", checkpoint_of(tmp_path / "packed"), tmp_path / "out")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "metadata", "offsets", "offsets/0"]
    assert (out / "offsets" / "0").read_text() == "v1\n{}\n"


def test_the_same_folder_packs_to_the_same_bytes(folder, tmp_path):
    pack_checkpoint(folder, tmp_path / "a")
    (folder / "metadata").touch()  # a newer modification time, the same content
    pack_checkpoint(folder, tmp_path / "b")
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_a_file_that_is_not_the_blocks_is_refused_and_nothing_unpacked(folder, tmp_path):
    pack_checkpoint(folder, tmp_path / "packed")
    named = checkpoint_of(tmp_path / "packed")
    data = bytearray((tmp_path / "packed").read_bytes())
    data[600] ^= 1
    (tmp_path / "packed").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="its bytes hash to .*not to its name"):
        unpack_checkpoint(tmp_path / "packed", named, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_member_that_leaves_the_folder_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    (tmp_path / "evil").write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError, match="not a folder packed by coord"):
        unpack_checkpoint(tmp_path / "evil", checkpoint_of(tmp_path / "evil"), tmp_path / "in" / "out")
    assert not (tmp_path / "in" / "escaped").exists()
