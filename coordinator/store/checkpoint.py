"""A current-ODF checkpoint file and the engine's checkpoint folder, each made from the other.

Our engine keeps its state in a folder (``engine/port.py``: the previous checkpoint is read
only, the new one a fresh folder); a 0.39 block names one file by its physical hash
(``Checkpoint``). ``pack_checkpoint`` makes the file of a folder, ``unpack_checkpoint`` the
folder of a file.

Invariants:

- A packed file's bytes depend only on the files' paths and contents (members sorted by path,
  owner 0, mode 644 or 755, time 0): the same folder packs to the same hash.
- A file is checked against the checkpoint its block names (size, then SHA3-256 of its bytes)
  before a byte of it is parsed; only then is it unpacked, with tarfile's ``data`` filter (no
  absolute paths, no ``..``, no links that leave the folder, no devices), into a folder that
  did not exist: what the engine reads is exactly what the block names.
"""
from __future__ import annotations

import tarfile
from pathlib import Path

from ..metadata.odf39.events import Checkpoint
from .read import StoreError
from .verify import file_problem


class CheckpointError(StoreError):
    """A checkpoint file that is not the one its block names, or not a packed folder."""


def pack_checkpoint(folder: Path, path: Path) -> None:
    """``folder`` as one tar file whose bytes depend only on the files' paths and contents:
    members sorted by path, owner 0, mode 644 (755 for folders), time 0."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for member in sorted(folder.rglob("*")):
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


def unpack_checkpoint(path: Path, checkpoint: Checkpoint, into: Path) -> Path:
    """The folder packed in ``path``, unpacked into ``into`` (which must not exist), once the
    file is found to be ``checkpoint`` (its size and hash); returns ``into``."""
    problem = file_problem(path, checkpoint.physical_hash, checkpoint.size)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path}: {problem}; it cannot be resumed from (pull "
                              "the dataset again from where it came)")
    into.mkdir(parents=True)
    try:
        with tarfile.open(path, "r:") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise CheckpointError(f"checkpoint {path} is not a folder packed by coord ({e}); "
                              "it cannot be resumed from") from None
    return into
