"""Run folders and their leases: held while their process lives, free the moment it dies.

The holder is a real child process, killed with SIGKILL as a crash would; the engine's side of
the lease (engines/spark/odf_spark_engine/lease.py) is checked against the same folders.
"""
from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from coordinator.engine import stubs
from coordinator.workspace.runs import LEASE_NAME, abandoned_run_folders, run_folder
from tests.support.cli import run_folder_holder

sys.path.insert(0, str(stubs.ENGINE_DIR))
from odf_spark_engine import lease as engine_lease  # noqa: E402 - the engine's own package


@pytest.fixture
def holder(tmp_path):
    """A child process holding a run folder under tmp_path/run: (process, folder)."""
    with run_folder_holder(tmp_path / "run", "coord", "pull", "x") as held:
        yield held


def test_a_run_folder_is_removed_when_its_block_ends(tmp_path):
    with run_folder(tmp_path, "engine") as path:
        assert path.is_dir() and path.name.startswith("engine-")
        (path / "output.parquet").write_bytes(b"x")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_held_by_a_live_process_is_not_abandoned(tmp_path, holder):
    with abandoned_run_folders(tmp_path / "run") as abandoned:
        assert abandoned == []
    _, folder = holder
    assert folder.is_dir()


def test_a_folder_of_a_killed_process_is_abandoned_and_removed(tmp_path, holder):
    proc, folder = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with abandoned_run_folders(tmp_path / "run") as abandoned:
        assert [a.path for a in abandoned] == [folder]
        assert abandoned[0].owner["pid"] == proc.pid
        assert abandoned[0].owner["argv"] == ["coord", "pull", "x"]
        assert folder.is_dir()  # still there while the caller stops what used it
    assert not folder.exists()


def test_the_engine_sees_the_lease_held_while_its_holder_lives(holder):
    _, folder = holder
    assert engine_lease.held(str(folder / LEASE_NAME))


def test_the_engine_is_told_within_a_second_when_the_holder_dies(holder):
    proc, folder = holder
    released = threading.Event()
    engine_lease.watch(str(folder / LEASE_NAME), released.set, poll=0.1)
    time.sleep(0.3)
    assert not released.is_set()
    killed_at = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    assert released.wait(timeout=5)
    assert time.monotonic() - killed_at < 1.0


def test_a_missing_lease_counts_as_free(tmp_path):
    assert not engine_lease.held(str(tmp_path / "gone" / LEASE_NAME))


_LEASE_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def command_lease(tmp_path):
    """A child process holding a lease in a warm engine's folder of leases: (process, folder)."""
    import subprocess

    leases = tmp_path / "leases"
    leases.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _LEASE_HOLDER, str(leases / "cmd")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc, leases
    proc.kill()
    proc.wait()


def test_a_warm_engine_stays_keep_warm_after_its_last_command_dies(command_lease):
    proc, leases = command_lease
    released = threading.Event()
    engine_lease.watch(str(leases), released.set, poll=0.1, keep_warm=1.0)
    time.sleep(0.5)
    assert not released.is_set()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    freed_at = time.monotonic()
    assert released.wait(timeout=5)
    assert 1.0 <= time.monotonic() - freed_at < 3.0


def test_a_warm_engine_does_not_end_while_a_command_decides_to_use_it(tmp_path):
    import fcntl
    import os

    leases = tmp_path / "leases"
    leases.mkdir()
    guard = os.open(leases, os.O_RDONLY)
    fcntl.flock(guard, fcntl.LOCK_EX)  # what warm.acquire holds while it looks at the engine
    released = threading.Event()
    engine_lease.watch(str(leases), released.set, poll=0.1, keep_warm=0.2)
    assert not released.wait(timeout=1.0)
    os.close(guard)
    assert released.wait(timeout=2.0)
