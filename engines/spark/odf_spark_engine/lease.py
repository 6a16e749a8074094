"""The engine's liveness lease: the engine lives only while the processes using it do.

The coordinator holds an exclusive ``flock`` on a file in the engine's run folder for as long
as it needs the engine (coordinator/workspace/runs.py). The kernel drops that lock when the
coordinator exits, however it exits (SIGKILL, OOM kill), so the engine polls it: once a shared
lock on the file can be taken, or the file is gone, nobody holds the lease and the engine ends
itself. This works the same under bubblewrap and in a container: the run folder is bind-mounted
at the same path, and a lock belongs to the file, which is the same inode on both sides.

A warm engine (``keep_warm`` seconds, coordinator/engine/warm.py) outlives the command that
started it and serves the workspace's next commands: its lease is a *folder* in which each
command using it holds a file of its own, and it ends once no file there has been held for
``keep_warm`` seconds. Before ending it takes the folder's own lock (an exclusive ``flock`` on
the folder, which a command holds while it decides whether to use the engine) and looks once
more, so a command never attaches to an engine that has decided to end.
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


def in_use(path: str) -> bool:
    """A lease file: ``held``; a folder of leases: any file in it held."""
    if not os.path.isdir(path):
        return held(path)
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return False
    return any(held(os.path.join(path, name)) for name in names)


def _free_under_guard(folder: str) -> bool:
    """True when the lease folder's own lock can be taken and no lease is held meanwhile;
    the lock is then kept (released by the kernel when the engine exits)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False  # a command is deciding whether to use the engine: look again later
    if in_use(folder):
        os.close(fd)
        return False
    return True


def watch(path: str, on_released: Callable[[], None], poll: float = POLL_SECONDS,
          keep_warm: float = 0.0) -> threading.Thread:
    """Calls ``on_released()`` once (from a daemon thread) when the lease is no longer held,
    or, with ``keep_warm``, when no lease of the folder ``path`` has been held for that long."""

    def run() -> None:
        if not keep_warm:
            while held(path):
                time.sleep(poll)
            on_released()
            return
        free_since = None
        while True:
            if in_use(path):
                free_since = None
            elif free_since is None:
                free_since = time.monotonic()
            elif time.monotonic() - free_since >= keep_warm and _free_under_guard(path):
                on_released()
                return
            time.sleep(poll)

    thread = threading.Thread(target=run, name="lease-watch", daemon=True)
    thread.start()
    return thread
