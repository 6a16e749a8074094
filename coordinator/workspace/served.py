"""The workspace lease of ``coord serve``: one build service per workspace.

``.coord/serve.lock`` holds an exclusive ``flock`` while a service runs, and says its PID.
The kernel drops the lock however the service dies (SIGKILL included), so a crashed service
never blocks the next one and a stale PID in the file means nothing: only the lock counts.

While a workspace is served, the service is its only writer: the CLI's write commands
(pull, add, delete, reset) ask ``refuse_if_served`` first and stop with one line naming the
PID; reads never look at the lease.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import Conflict
from .runs import take_lease

LEASE = "serve.lock"


class WorkspaceServed(Conflict):
    def __init__(self, pid: int | None):
        who = f"PID {pid}" if pid else "another process"
        super().__init__(f"the workspace is served by {who} (stop it or use its API)")
        self.pid = pid


class ServeLease:
    """Held by the running service; ``acquire`` refuses when another service holds it."""

    def __init__(self, meta: Path):
        self.path = meta / LEASE
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceServed(_pid_in(self.path)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the PID stays in the file: harmless, the lock is what counts
            self._fd = None

    def __enter__(self) -> ServeLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def served_by(meta: Path) -> int | None:
    """The PID of the service holding the workspace at ``meta`` (its ``.coord``), or None;
    0 when one holds it but has not written its PID yet."""
    path = meta / LEASE
    if not path.exists():  # never served (the file stays once created)
        return None
    fd = take_lease(path)
    if fd is None:
        return _pid_in(path) or 0
    os.close(fd)
    return None


def refuse_if_served(meta: Path) -> None:
    """Raise ``WorkspaceServed`` when another process serves the workspace."""
    pid = served_by(meta)
    if pid is not None and pid != os.getpid():
        raise WorkspaceServed(pid)


def _pid_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
