"""A current-ODF checkpoint file and the engine's checkpoint folder, each made from the other.

Our engine keeps its state in a folder (``engine/port.py``: the previous checkpoint is read
only, the new one a fresh folder); a 0.39 block names one file by its physical hash
(``Checkpoint``). ``pack_checkpoint`` makes the file of a folder, ``unpack_checkpoint`` the
folder of a file.

Invariants:

- A packed file's bytes depend only on the files' paths and contents (members sorted by path,
  owner 0, mode 644 or 755, time 0): the same folder packs to the same hash.
- A file is checked against the checkpoint its block names (size, then SHA3-256 of its bytes)
  before a byte of it is parsed. That proves only that it is the file the block's author
  chose, and a pulled or pushed dataset's author may be anyone, so it is then unpacked by our
  own allow-list, not by ``tarfile``'s extraction (whose filters some Pythons let nested links
  through): regular files and folders only, each name plain and relative (no ``..``, no
  absolute path, no empty or ``.`` part, no backslash or NUL), no link, device or sparse file,
  at most ``MAX_MEMBERS`` members and ``MAX_UNPACKED`` bytes. Every folder and file is created
  by us, exclusively, through the folder's own descriptors and without following a link, inside
  a folder that did not exist: nothing is written outside it, whatever the archive says.
"""
from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

from ..metadata.odf39.events import Checkpoint
from .read import StoreError
from .verify import file_problem

MAX_MEMBERS = 100_000  # files and folders in one checkpoint (Spark's state holds a few per partition)
MAX_UNPACKED = 16 << 30  # bytes of all its files together
_CHUNK = 1 << 20
_PLAIN_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)


class CheckpointError(StoreError):
    """A checkpoint file that is not the one its block names, or not a packed folder."""


def pack_checkpoint(folder: Path, path: Path) -> None:
    """``folder`` as one tar file whose bytes depend only on the files' paths and contents:
    members sorted by path, owner 0, mode 644 (755 for folders), time 0.

    Spark's state store maintenance may still be at work in the folder after the step's query
    ended (a background task that snapshots a store and then removes files older than a
    snapshot already there): a file it is writing (a temporary, ``*.tmp``, ``*.tmp.crc``) is
    left out, and so is one gone by the time it is read (older than a snapshot already listed,
    so nothing the state needs). Every other file is whole once it has its name (Spark renames
    a file it finished into place)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for member in sorted(folder.rglob("*")):
            if member.name.endswith((".tmp", ".tmp.crc")):
                continue
            try:
                info = tar.gettarinfo(str(member), arcname=member.relative_to(folder).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                info.mode = 0o755 if member.is_dir() else 0o644
                if member.is_file():
                    with open(member, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
            except FileNotFoundError:
                continue


def unpack_checkpoint(path: Path, checkpoint: Checkpoint, into: Path) -> Path:
    """The folder packed in ``path``, unpacked into ``into`` (which must not exist), once the
    file is found to be ``checkpoint`` (its size and hash); returns ``into``. On any refusal
    ``into`` is removed again: nothing half-unpacked stays."""
    problem = file_problem(path, checkpoint.physical_hash, checkpoint.size)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path}: {problem}; it cannot be resumed from (pull "
                              "the dataset again from where it came)")
    into.mkdir(parents=True)
    root = os.open(into, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with tarfile.open(path, "r:") as tar:
            _unpack(tar, root)
    except (tarfile.TarError, OSError, _Refused) as e:
        shutil.rmtree(into, ignore_errors=True)
        why = str(e) if isinstance(e, _Refused) else f"not a folder packed by coord ({e})"
        raise CheckpointError(f"checkpoint {path}: {why}; it cannot be resumed from") from None
    finally:
        os.close(root)
    return into


class _Refused(Exception):
    """A member the allow-list does not take."""


def _unpack(tar: tarfile.TarFile, root: int) -> None:
    members = total = 0
    for member in tar:
        members += 1
        if members > MAX_MEMBERS:
            raise _Refused(f"it holds more than {MAX_MEMBERS:,} files and folders")
        parts = _plain_parts(member)
        if member.type == tarfile.DIRTYPE:
            os.close(_folder(root, parts))
            continue
        total += member.size
        if total > MAX_UNPACKED:
            raise _Refused(f"its files add up to more than {MAX_UNPACKED >> 20:,} MiB")
        parent = _folder(root, parts[:-1])
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                         dir_fd=parent)
        except FileExistsError:
            raise _Refused(f"it names {member.name!r} twice") from None
        finally:
            os.close(parent)
        source = tar.extractfile(member)
        assert source is not None  # a regular member always has a file object
        with os.fdopen(fd, "wb") as out, source:
            while chunk := source.read(_CHUNK):
                out.write(chunk)


def _plain_parts(member: tarfile.TarInfo) -> list[str]:
    """The member's name as plain folder names, or a refusal naming it and why."""
    if member.type not in _PLAIN_TYPES or member.sparse is not None:
        raise _Refused(f"{member.name!r} is not a plain file or folder (links, devices and "
                       "sparse files are not unpacked)")
    name = member.name[:-1] if member.name.endswith("/") and member.isdir() else member.name
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\0" in name
            or any(p in ("", ".", "..") for p in parts)):
        raise _Refused(f"{member.name!r} is not a plain relative name")
    return parts


def _folder(root: int, parts: list[str]) -> int:
    """A descriptor of the folder ``parts`` below ``root``, made where missing; no part may be
    a link (``O_NOFOLLOW``) or a file."""
    fd = os.dup(root)
    for part in parts:
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            os.close(fd)
            raise _Refused(f"{part!r} is both a file and a folder in it") from None
        os.close(fd)
        fd = child
    return fd

