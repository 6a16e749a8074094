"""A command acts only on the warm engine its own workspace started: a record that names
another process or container (crafted), or another workspace's engine (a ``cp -a`` copy's
record), is ignored, and what it names keeps running.

Real `coord` commands over a sandboxed workspace; the decoys are real processes and containers.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from coordinator.engine.attach import EngineEndpoint
from coordinator.metadata.objects import EngineIdentity
from coordinator.workspace import Workspace

from ..support.cli import coord
from .pipeline import HOURLY, expected_hourly, write_orders_file
from .test_derivative_pull import records
from .test_warm_engine import WARM, spark_starts, warm_engines, workspace

pytestmark = pytest.mark.engine_start


def craft_record(home: Path, **engine: object) -> None:
    """A warm engine record that names ``engine`` (a pid or a container), as written by
    someone who can write the workspace: with its path and instance id, and a socket file
    that answers nothing."""
    ws = Workspace.open(home)
    folder = ws.run_dir / "warm"
    (folder / "leases").mkdir(parents=True, exist_ok=True)
    (folder / "engine.sock").write_bytes(b"")
    EngineEndpoint(folder / "engine.sock", folder, (ws.meta / "datasets",),
                   EngineIdentity(runtime="sandbox")).write(folder / "endpoint.json")
    (folder / "engine.json").write_text(json.dumps({
        "fingerprint": "crafted", "runtime": "sandbox", "keep_warm": 5, "started": 0,
        "workspace": str(ws.root), "instance": ws.instance_id, **engine}))


def started_at(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def test_a_crafted_record_naming_another_process_leaves_it_running(tmp_path):
    rows = workspace(tmp_path, "5s")
    lease = tmp_path / ".coord" / "run" / "warm" / "leases"
    # its command line even names this workspace's leases, as a warm engine's does
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "--lease", str(lease)])
    try:
        craft_record(tmp_path, pid=decoy.pid, pid_start=started_at(decoy.pid))
        pulled = coord("-v", "pull", HOURLY, cwd=tmp_path, env=WARM)
        assert decoy.poll() is None, "coord killed a process its workspace did not start"
        assert f"process {decoy.pid} is not its engine" in pulled.stderr
        assert records(tmp_path, HOURLY) == expected_hourly(rows[:12], watermark=rows[11][0])
    finally:
        decoy.kill()
        coord("system", "engines", "--stop", cwd=tmp_path)


@pytest.mark.container
def test_a_crafted_record_naming_another_container_leaves_it_running(tmp_path):
    import docker

    from coordinator.engine.container import ULIMITS, api_url

    client = docker.DockerClient(base_url=api_url())
    base = next(t for i in client.images.list() for t in i.tags if t.startswith("localhost/odf-base:"))
    limits = [docker.types.Ulimit(name=n, soft=v, hard=v) for n, v in ULIMITS.items()]  # Podman needs them
    decoy = client.containers.run(base, ["sleep", "600"], name=f"unrelated-{uuid.uuid4().hex[:8]}",
                                  detach=True, network_mode="none", ulimits=limits)
    try:
        rows = workspace(tmp_path, "5s")
        craft_record(tmp_path, container=decoy.name)
        coord("pull", HOURLY, cwd=tmp_path, env=WARM)
        decoy.reload()  # raises NotFound had coord removed it
        assert decoy.status == "running"
        assert records(tmp_path, HOURLY) == expected_hourly(rows[:12], watermark=rows[11][0])
    finally:
        decoy.remove(force=True)
        client.close()
        coord("system", "engines", "--stop", cwd=tmp_path)


def test_a_command_in_a_copy_of_the_workspace_leaves_the_originals_warm_engine_running(tmp_path):
    original, copy = tmp_path / "original", tmp_path / "copy"
    original.mkdir()
    rows = workspace(original, "100s")
    coord("pull", HOURLY, cwd=original, env=WARM)
    [engine] = warm_engines(original)
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    try:
        coord("pull", HOURLY, cwd=copy, env=WARM)  # an engine of its own, the original's untouched
        assert warm_engines(original) == [engine]

        write_orders_file(original, "2024-01-02.csv", rows[12:])
        coord("pull", "--recursive", HOURLY, cwd=original, env=WARM)
        assert spark_starts(original) == 1, "the original's warm engine was not the one used"
        assert records(original, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])
    finally:
        for home in (original, copy):
            coord("system", "engines", "--stop", cwd=home)
        shutil.rmtree(copy, ignore_errors=True)
