"""Run folders: ``.coord/run/<prefix>-<id>/``, the scratch space of one running command.

A run folder is held by the process using it through a *lease*: an exclusive ``flock`` on
``<folder>/lease``, a file that also says who holds it (pid, command line, start time). The
kernel drops the lock when the holder exits, however it exits (SIGKILL, OOM kill), so:

- a run folder whose lease is free was left by a dead process: ``abandoned_run_folders``
  finds them and holds their leases while the caller cleans up, so two commands never clean
  the same folder and no live command loses its own;
- an engine started for a run folder watches the same lease
  (engines/spark/odf_spark_engine/lease.py) and ends itself once it is free.

A folder is created under a temporary name and renamed once its lease is held, so nobody ever
sees a run folder with a free lease whose holder is alive. Folders without a lease file (the
per-dataset staging of repository pulls, the engines' shared input folder) are not run folders
and are never touched here.
"""
from __future__ import annotations

import fcntl
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .fsutil import TMP_PREFIX, remove, tmp_name

LEASE_NAME = "lease"


@contextmanager
def run_folder(run_root: Path, prefix: str) -> Iterator[Path]:
    """A new run folder held by this process; removed when the block ends."""
    run_root.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(run_root)
    tmp.mkdir()
    fd = os.open(tmp / LEASE_NAME, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else knows the folder yet: never blocks
        owner = {"pid": os.getpid(), "argv": sys.argv, "started": time.time()}
        os.write(fd, json.dumps(owner).encode())
        path = run_root / f"{prefix}-{uuid.uuid4().hex[:8]}"
        os.rename(tmp, path)
    except BaseException:
        remove(tmp)
        os.close(fd)
        raise
    try:
        yield path
    finally:
        remove(path)  # while still holding the lease: nobody else removes it meanwhile
        os.close(fd)


@dataclass
class AbandonedRunFolder:
    path: Path
    owner: dict  # what its lease says about the dead holder: pid, argv, started (may be {})


@contextmanager
def abandoned_run_folders(run_root: Path) -> Iterator[list[AbandonedRunFolder]]:
    """The run folders left by dead processes; their leases are held while the block runs,
    and the folders are removed when it ends."""
    held: list[tuple[AbandonedRunFolder, int]] = []
    try:
        for lease in sorted(run_root.glob(f"*/{LEASE_NAME}")) if run_root.is_dir() else []:
            if lease.parent.name.startswith(TMP_PREFIX):
                continue  # being created (its lease may not be taken yet)
            fd = take_lease(lease)
            if fd is not None:
                held.append((AbandonedRunFolder(lease.parent, _owner(fd)), fd))
        yield [folder for folder, _ in held]
    finally:
        for folder, fd in held:
            remove(folder.path)
            os.close(fd)


def run_folder_held(path: Path) -> bool:
    """True while a live process holds the run folder at ``path``."""
    fd = take_lease(path / LEASE_NAME)
    if fd is None:
        return (path / LEASE_NAME).exists()
    os.close(fd)
    return False


def take_lease(lease: Path) -> int | None:
    """An fd holding ``lease`` exclusively, or None if a live process holds it (or it's gone)."""
    try:
        fd = os.open(lease, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _owner(fd: int) -> dict:
    try:
        owner = json.loads(os.pread(fd, 65536, 0) or b"{}")
    except ValueError:  # killed before it wrote who it was
        return {}
    return owner if isinstance(owner, dict) else {}
