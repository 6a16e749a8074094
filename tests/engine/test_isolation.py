"""What a hostile query could reach from inside a running engine: nothing of the user's but
its inputs. In each runtime, an engine is started exactly as the coordinator starts one for a
workspace (``open_engine``: its run folder, the workspace's datasets read-only), and a probe
runs *inside that engine's own view* (the sandbox's mount namespace, or ``podman exec`` in
the container): it reads the workspace's signing key, a file in the home folder, a file next
to the workspace, a dataset file (the control: it must be readable), and the environment and
capabilities of every engine process.

The workspace lives in the home folder, not under /tmp: the engines' private /tmp would hide
it whatever the mounts, and the test would prove nothing.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from coordinator.engine.runtime import running_engine
from coordinator.engine.sandbox import class_archive_path
from coordinator.engine.session import dataset_folders
from coordinator.engine.settings import EngineSettings
from coordinator.workspace import Workspace

pytestmark = pytest.mark.engine_start

SECRET = f"probe-secret-{uuid.uuid4().hex}"

PROBE = """
import json, os, sys
files = {}
for path in sys.argv[1:]:
    try:
        files[path] = open(path).read()
    except OSError as exc:
        files[path] = type(exc).__name__
environments, capabilities = {}, {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        command = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
    except OSError:
        continue
    if b"odf_spark_engine.server" in command or b"org.apache.spark.deploy.SparkSubmit" in command:
        name = "engine" if b"odf_spark_engine.server" in command else "jvm"
        environments[name] = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        capabilities[name] = int(status["CapEff"], 16)
print(json.dumps({"files": files, "environments": environments, "capabilities": capabilities}))
"""


@pytest.fixture
def user_files(monkeypatch):
    """A user's machine: a workspace in the home folder with one dataset file, a file next to
    the workspace, a file in the home folder, and a credential in the environment."""
    base = Path(tempfile.mkdtemp(prefix=".coord-probe-", dir=Path.home()))
    home_file = Path.home() / f"{base.name}.secret"
    try:
        ws = Workspace.init(base / "ws")
        dataset_file = ws.dataset("probe").root / "data.txt"
        dataset_file.parent.mkdir(parents=True)
        dataset_file.write_text("input bytes")
        other_dataset_file = ws.dataset("other").root / "data.txt"
        other_dataset_file.parent.mkdir(parents=True)
        other_dataset_file.write_text(SECRET)
        (base / "next-to-workspace.txt").write_text(SECRET)
        home_file.write_text(SECRET)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        yield {
            "ws": ws,
            "key": ws.key_path,
            "home": home_file,
            "sibling": base / "next-to-workspace.txt",
            "dataset": dataset_file,
            "other dataset": other_dataset_file,
        }
    finally:
        home_file.unlink(missing_ok=True)
        shutil.rmtree(base)


def run_probe(runtime: str, ws: Workspace, paths: list[Path]) -> dict:
    """Starts an engine the way ``open_engine`` does for a transform reading ``probe`` and runs
    PROBE inside its view."""
    settings = EngineSettings(runtime=runtime, spark_master="local[1]")
    run_dir = ws.run_dir / f"engine-{uuid.uuid4().hex[:8]}"
    with running_engine(settings, run_dir, dataset_folders(ws, ["probe"])) as engine:
        if runtime == "sandbox":
            # The engine's own mount namespace: its mounts, and its /proc.
            command = ["nsenter", "--target", str(engine.engine_pid), "--mount", "--",
                       sys.executable, "-c", PROBE]
        else:
            command = ["podman", "exec", engine.name, "python3", "-c", PROBE]
        done = subprocess.run([*command, *map(str, paths)], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_sees_only_its_inputs(result: dict, files: dict) -> None:
    seen = result["files"]
    assert seen[str(files["dataset"])] == "input bytes"  # control: the probe does read files
    for name in ("key", "home", "sibling", "other dataset"):
        assert files[name].read_bytes(), name  # there to be read, outside
        assert seen[str(files[name])] == "FileNotFoundError", name
    assert set(result["environments"]) == {"engine", "jvm"}
    for environment in result["environments"].values():
        assert "AWS_SECRET_ACCESS_KEY" not in environment
        assert SECRET not in json.dumps(environment)
    # No capabilities, though the coordinator may run as root: no mounting the host's disks.
    assert result["capabilities"] == {"engine": 0, "jvm": 0}


def probe_paths(files: dict) -> list[Path]:
    return [files[name] for name in ("key", "home", "sibling", "dataset", "other dataset")]


def test_sandbox_engine_sees_only_its_inputs_and_its_own_environment(user_files):
    result = run_probe("sandbox", user_files["ws"], probe_paths(user_files))
    assert_sees_only_its_inputs(result, user_files)
    # The environment is the explicit list, nothing more (bubblewrap adds PWD: the run folder),
    # and where this machine has Spark's class archive, its path (read-only, classes only).
    archive = {"ODF_SPARK_CLASS_ARCHIVE"} if class_archive_path().is_file() else set()
    assert set(result["environments"]["engine"]) == {
        "HOME", "LANG", "TZ", "SPARK_LOCAL_IP", "PYTHONDONTWRITEBYTECODE", "PATH", "PYTHONPATH",
        "JAVA_HOME", "PWD", *archive,
    }


def test_container_engine_sees_only_its_inputs_and_its_own_environment(engine_image, user_files):
    result = run_probe("container", user_files["ws"], probe_paths(user_files))
    assert_sees_only_its_inputs(result, user_files)
