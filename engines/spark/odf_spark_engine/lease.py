"""The engine's liveness lease: the engine lives only while the process that started it does.

The coordinator holds an exclusive ``flock`` on a file in the engine's run folder for as long
as it needs the engine (coordinator/workspace/runs.py). The kernel drops that lock when the
coordinator exits, however it exits (SIGKILL, OOM kill), so the engine polls it: once a shared
lock on the file can be taken, or the file is gone, nobody holds the lease and the engine ends
itself. This works the same under bubblewrap and in a container: the run folder is bind-mounted
at the same path, and a lock belongs to the file, which is the same inode on both sides.
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable

POLL_SECONDS = 0.5


def held(path: str) -> bool:
    """True while some process holds the lease at ``path`` (an exclusive lock on it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock, so the coordinator's reaper can take it
    return False


def watch(path: str, on_released: Callable[[], None], poll: float = POLL_SECONDS) -> threading.Thread:
    """Calls ``on_released()`` once (from a daemon thread) when the lease is no longer held."""

    def run() -> None:
        while held(path):
            time.sleep(poll)
        on_released()

    thread = threading.Thread(target=run, name="lease-watch", daemon=True)
    thread.start()
    return thread
