"""A checkpoint folder packed as one file and unpacked again (``store/checkpoint.py``): the file
is the block's (size and hash) before a byte of it is parsed, and it unpacks only inside the
folder it is given, as plain files and folders, whatever the archive (which anyone who authors
a block can craft) says and whatever the Python's own tar filters let through."""
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
    with pytest.raises(CheckpointError, match="'../escaped' is not a plain relative name"):
        unpack_checkpoint(tmp_path / "evil", checkpoint_of(tmp_path / "evil"), tmp_path / "in" / "out")
    assert not (tmp_path / "in" / "escaped").exists()


def crafted(path, *members: tuple[str, bytes, str]) -> None:
    """A tar file of ``members``: (name, content or link target, type: file, dir, symlink,
    hardlink, fifo, sparse)."""
    types = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
             "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE, "sparse": tarfile.GNUTYPE_SPARSE}
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, content, kind in members:
            info = tarfile.TarInfo(name)
            info.type = types[kind]
            if kind in ("symlink", "hardlink"):
                info.linkname = content.decode()
                tar.addfile(info)
            elif kind in ("file", "sparse"):
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
            else:
                tar.addfile(info)


def unpack(path, into):
    return unpack_checkpoint(path, checkpoint_of(path), into)


def test_a_link_to_outside_and_a_file_written_through_it_are_refused_and_nothing_stays(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    crafted(tmp_path / "evil", ("state", b"", "dir"), ("state/escape", str(outside).encode(), "symlink"),
            ("state/escape/pwned", b"owned", "file"))
    with pytest.raises(CheckpointError, match="'state/escape' is not a plain file or folder"):
        unpack(tmp_path / "evil", tmp_path / "out")
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "out").exists()  # nothing half-unpacked


def test_nested_relative_links_that_climb_out_are_refused(tmp_path):
    # the shape of CVE-2025-4517: each link climbs one level through the one before it
    members = [("a", b"", "dir"), ("a/l0", b".", "symlink")]
    members += [(f"a/l{n}", f"l{n - 1}/..".encode(), "symlink") for n in range(1, 8)]
    members.append(("a/l7/pwned", b"owned", "file"))
    crafted(tmp_path / "evil", *members)
    with pytest.raises(CheckpointError, match="'a/l0' is not a plain file or folder"):
        unpack(tmp_path / "evil", tmp_path / "in" / "out")
    assert not (tmp_path / "in" / "pwned").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("kind", ["hardlink", "fifo", "sparse"])
def test_hard_links_devices_and_sparse_files_are_refused(tmp_path, kind):
    crafted(tmp_path / "evil", ("x", b"/etc/passwd" if kind == "hardlink" else b"", kind))
    with pytest.raises(CheckpointError, match="'x' is not a plain file or folder"):
        unpack(tmp_path / "evil", tmp_path / "out")


@pytest.mark.parametrize("name", ["/abs", "a/../../b", "./a", "a//b", "a\\..\\b"])
def test_names_that_are_not_plain_and_relative_are_refused(tmp_path, name):
    crafted(tmp_path / "evil", (name, b"x", "file"))
    with pytest.raises(CheckpointError, match="is not a plain relative name"):
        unpack(tmp_path / "evil", tmp_path / "out")


def test_a_name_given_twice_is_refused_rather_than_overwritten(tmp_path):
    crafted(tmp_path / "evil", ("f", b"first", "file"), ("f", b"second", "file"))
    with pytest.raises(CheckpointError, match="it names 'f' twice"):
        unpack(tmp_path / "evil", tmp_path / "out")


def test_a_file_in_place_of_a_folder_is_refused(tmp_path):
    crafted(tmp_path / "evil", ("f", b"x", "file"), ("f/g", b"y", "file"))
    with pytest.raises(CheckpointError, match="'f' is both a file and a folder"):
        unpack(tmp_path / "evil", tmp_path / "out")


def test_more_members_than_the_bound_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("coordinator.store.checkpoint.MAX_MEMBERS", 3)
    crafted(tmp_path / "many", *[(f"f{n}", b"x", "file") for n in range(4)])
    with pytest.raises(CheckpointError, match="more than 3 files and folders"):
        unpack(tmp_path / "many", tmp_path / "out")


def test_files_adding_up_past_the_bound_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("coordinator.store.checkpoint.MAX_UNPACKED", 1 << 30)
    crafted(tmp_path / "big", ("a", b"x" * 10, "file"))
    unpack(tmp_path / "big", tmp_path / "ok")  # under the bound
    monkeypatch.setattr("coordinator.store.checkpoint.MAX_UNPACKED", 5)
    with pytest.raises(CheckpointError, match="its files add up to more than"):
        unpack(tmp_path / "big", tmp_path / "out")


def test_packing_leaves_out_the_temporaries_spark_may_still_be_writing(tmp_path):
    folder = tmp_path / "checkpoint"
    (folder / "state" / "0").mkdir(parents=True)
    (folder / "state" / "0" / "1.delta").write_bytes(b"delta")
    (folder / "state" / "0" / ".20.snapshot.1f2e.tmp").write_bytes(b"half")
    (folder / "state" / "0" / "..20.snapshot.1f2e.tmp.crc").write_bytes(b"half")
    pack_checkpoint(folder, tmp_path / "packed")
    out = unpack_checkpoint(tmp_path / "packed", checkpoint_of(tmp_path / "packed"), tmp_path / "out")
    assert sorted(p.name for p in (out / "state" / "0").iterdir()) == ["1.delta"]
