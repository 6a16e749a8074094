"""One writer per dataset: an exclusive, non-blocking ``flock`` on a lock file.

The kernel drops the lock when the process dies, so a crashed writer never blocks the next.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Self

from ..errors import Conflict


class DatasetBusy(Conflict):
    def __init__(self, dataset_id: str):
        super().__init__(f"dataset {dataset_id} is busy (another coord process is writing it)")
        self.dataset_id = dataset_id


class DatasetLock:
    def __init__(self, path: Path, dataset_id: str):
        self.path, self.dataset_id = path, dataset_id
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DatasetBusy(self.dataset_id) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class LockedWriter:
    """A dataset's writer, the only one while it is open: ``with`` holds its lock.

    ``_open`` runs under the lock as it is taken (if it fails, the lock is released). An
    ``OSError`` inside the ``with`` (a full disk) runs ``_after_os_error`` under the lock, then
    is raised as the ``CoordError`` ``_os_error`` words, naming where the dataset stays.
    """

    def __init__(self, lock: DatasetLock):
        self._lock = lock

    def _open(self) -> None:
        raise NotImplementedError

    def _after_os_error(self) -> None:
        raise NotImplementedError

    def _os_error(self, exc: OSError) -> Exception:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._lock.acquire()
        try:
            self._open()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if isinstance(exc, OSError):
                self._after_os_error()
        finally:
            self._lock.release()
        if isinstance(exc, OSError):
            raise self._os_error(exc) from exc
