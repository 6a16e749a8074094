"""An engine never outlives the command that started it, in either runtime.

A real `coord pull` of a Spark derivative is SIGKILLed at three moments: while its engine
starts, while the engine executes the query, and while the result is committed. After each
kill no engine process (process table) or container (container API) of the workspace is left
a few seconds later; the next command removes the run folder the kill left and says so; and
the final pull commits the step exactly once. That pull attaches to the worker's shared engine
(tests/support/engines.py): what it proves is the coordinator's recovery, not another start.
(A pull that ends normally removes its own engine's run folder: tests/transform/test_spark_cluster.py
for the sandbox, tests/transform/test_container_pull.py for the container.)
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import docker
import pytest

from coordinator.engine.container import api_url, workspace_containers

from ..support import engines as test_engines
from ..support.cli import coord, coord_started
from .pipeline import HOURLY, ORDERS, expected_hourly, order_rows, write_manifests, write_orders_file
from .test_derivative_pull import blocks, records

pytestmark = pytest.mark.engine_start
GONE_WITHIN_SECONDS = 15  # the engine polls its lease twice a second; the rest is a busy machine


def test_a_killed_pull_leaves_no_sandboxed_engine(tmp_path, shared_engine):
    _kill_pulls_at_three_moments(tmp_path, "sandbox", shared_engine)


def test_a_killed_pull_leaves_no_engine_container(tmp_path, engine_image, shared_engine):
    _kill_pulls_at_three_moments(tmp_path, "container", shared_engine)


def test_system_engines_stop_ends_the_engine_of_a_running_pull(tmp_path):
    home = tmp_path
    _workspace_with_orders(home)
    pull = coord_started("pull", HOURLY, cwd=home, env={"COORD_ENGINE_RUNTIME": "sandbox"})
    _wait_for(lambda: _engine_processes(home), pull)
    assert "stopped 1 engine" in coord("system", "engines", "--stop", cwd=home).stdout
    assert pull.wait(timeout=300) == 1
    assert pull.stderr.read().startswith("coord: error: ")
    _check_nothing_is_left(home, "sandbox", time.monotonic())
    assert not [b for b in blocks(home, HOURLY) if "inputSlices" in b]


def _workspace_with_orders(home: Path) -> list[tuple]:
    """A workspace whose root dataset is pulled and whose derivatives wait for their engine."""
    coord("init", "--odf", "0.18", cwd=home)
    rows = order_rows(6)
    write_orders_file(home, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", ORDERS, cwd=home)
    return rows


def _kill_pulls_at_three_moments(home: Path, runtime: str, shared_engine: Path) -> None:
    env = {"COORD_ENGINE_RUNTIME": runtime}
    rows = _workspace_with_orders(home)

    # 1. While the engine starts: it exists, its socket does not yet. `coord system engines`
    #    lists it, with the run folder of the pull.
    pull = coord_started("pull", HOURLY, cwd=home, env=env)
    _wait_for(lambda: _engine_processes(home) and not list(_run_folders(home, "engine.sock")), pull)
    listed = coord("system", "engines", cwd=home).stdout
    [run_id] = [lease.parent.name for lease in _run_folders(home, "lease")]
    assert any(line.split()[:2] == [run_id, runtime] and line.split()[-1] == "running"
               for line in listed.splitlines()), listed
    assert not list(_run_folders(home, "engine.sock")), "Spark started before the kill: too late"
    _kill_and_check_nothing_is_left(pull, home, runtime)
    after = coord("system", "engines", cwd=home)
    assert "no engines running" in after.stdout
    assert "removed 1 run folder" in after.stderr  # the one the kill left

    # 2. While it executes: the engine has logged the start of the request, not yet its end.
    pull = coord_started("pull", HOURLY, cwd=home, env=env)
    _wait_for(lambda: any("execute tx=" in p.read_text(errors="replace")
                          for p in _run_folders(home, "engine.log")), pull)
    _kill_and_check_nothing_is_left(pull, home, runtime)
    assert "removed 1 run folder" in coord("list", cwd=home).stderr
    assert not [b for b in blocks(home, HOURLY) if "inputSlices" in b]

    # 3. While the result is committed (the data file is in place, the head not yet moved).
    killed = coord("pull", HOURLY, cwd=home, env={**env, "COORD_CRASH_AT": "data-installed"}, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _check_nothing_is_left(home, runtime, time.monotonic())

    done = coord("pull", HOURLY, cwd=home, env={test_engines.ENV: f"attach:{shared_engine}"})
    assert "removed 1 run folder" in done.stderr
    assert len([b for b in blocks(home, HOURLY) if "inputSlices" in b]) == 1
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])


def _kill_and_check_nothing_is_left(pull, home: Path, runtime: str) -> None:
    pull.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    assert pull.wait() == -signal.SIGKILL
    _check_nothing_is_left(home, runtime, killed_at)


def _check_nothing_is_left(home: Path, runtime: str, since: float) -> None:
    def left():
        return _engine_processes(home) + (_engine_containers(home) if runtime == "container" else [])

    deadline = since + GONE_WITHIN_SECONDS
    while (still := left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not still, f"still there {GONE_WITHIN_SECONDS} s after the kill: {still}"


def _wait_for(condition, pull, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert pull.poll() is None, f"the pull ended first:\n{pull.stderr.read()}"
        assert time.monotonic() < deadline, "the moment to kill never came"
        time.sleep(0.05)


def _run_folders(home: Path, file_name: str):
    return (home / ".coord" / "run").glob(f"*/{file_name}")


def _engine_processes(home: Path) -> list[str]:
    """Processes whose command line or working folder is in the workspace's run folder: the
    sandbox (bwrap), the engine and Spark's JVM; in a container, its engine."""
    run = f"{home.resolve()}/.coord/run/"
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if run in cmdline or cwd.startswith(run):
            found.append(f"{pid}: {cmdline[:120]}")
    return found


def _engine_containers(home: Path) -> list[str]:
    client = docker.DockerClient(base_url=api_url())
    try:
        return [f"container {c.name} ({c.status})" for c in workspace_containers(client, home.resolve())]
    finally:
        client.close()
