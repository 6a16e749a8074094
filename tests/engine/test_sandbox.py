"""The sandbox really isolates: no network, writable only in its run folder; the engine in it
identifies itself."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from coordinator.engine.sandbox import bwrap_command, engine_files_hash
from coordinator.engine.settings import EngineSettings
from coordinator.errors import CoordError

PROBE_CONNECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    print("connected")
except OSError as exc:
    print("refused", exc)
"""

PROBE_WRITE = """
import sys
for path in sys.argv[1:]:
    try:
        open(path, "w").write("x")
        print(path, "written")
    except OSError as exc:
        print(path, "denied", exc.strerror)
"""


def run_sandboxed(settings, run_dir: Path, read_only: list[Path], script: str, *args: str) -> str:
    command = bwrap_command(settings, run_dir, read_only, [sys.executable, "-c", script, *args])
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.fixture
def host_server():
    """A TCP server on the host's loopback; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_sandbox_cannot_reach_the_host_network(tmp_path, host_server):
    isolated = run_sandboxed(EngineSettings(), tmp_path, [], PROBE_CONNECT, str(host_server))
    assert isolated.startswith("refused")
    # Control: the same probe with the network allowed does connect, so the refusal above
    # comes from the sandbox and not from the probe.
    allowed = run_sandboxed(EngineSettings(allow_network=True), tmp_path, [], PROBE_CONNECT, str(host_server))
    assert allowed.startswith("connected")


def test_sandbox_writes_only_in_its_run_folder(tmp_path):
    run_dir, inputs = tmp_path / "run", tmp_path / "inputs"
    run_dir.mkdir()
    inputs.mkdir()
    repo_file = Path(__file__).with_name("written-by-sandbox")
    targets = [run_dir / "ok", inputs / "input-overwrite", repo_file, Path("/tmp/private-tmp")]
    output = run_sandboxed(EngineSettings(), run_dir, [inputs], PROBE_WRITE, *map(str, targets))
    lines = dict(line.split(" ", 1) for line in output.splitlines())
    assert lines[str(run_dir / "ok")] == "written"
    assert lines[str(inputs / "input-overwrite")].startswith("denied")
    assert lines[str(repo_file)].startswith("denied")
    # /tmp inside is a private tmpfs: writable, but nothing reaches the host.
    assert lines["/tmp/private-tmp"] == "written"
    assert not Path("/tmp/private-tmp").exists()
    assert (run_dir / "ok").read_text() == "x"
    assert not (inputs / "input-overwrite").exists() and not repo_file.exists()


def test_non_local_master_requires_network():
    with pytest.raises(CoordError, match="engine.allowNetwork"):
        EngineSettings(spark_master="spark://10.1.2.3:7077")
    assert EngineSettings(spark_master="spark://10.1.2.3:7077", allow_network=True).network_isolated is False


@pytest.mark.spark
def test_engine_identity(engine_endpoint, engine_client):
    identity = engine_endpoint.identity
    assert identity.runtime == "sandbox"
    assert identity.version == "0.1.0"
    assert identity.spark_version == "4.3.0"
    assert identity.files_hash == engine_files_hash() and len(identity.files_hash) == 64
    assert identity.spark_master == "local[2]"
    assert identity.network_isolated is True
    info = engine_client.identify()
    assert (info.engine_name, info.spark_version, info.spark_master) == ("spark", "4.3.0", "local[2]")


@pytest.mark.engine_start
def test_an_engine_deep_in_a_long_path_is_reachable(tmp_path):
    from coordinator.engine.client import EngineClient
    from coordinator.engine.sandbox import start_sandbox

    run_dir = tmp_path / ("a-rather-long-folder-name-" * 4) / "run"
    assert len(str(run_dir / "engine.sock")) > 107  # beyond what a unix socket path may be
    engine = start_sandbox(EngineSettings(runtime="sandbox"), run_dir, [])
    try:
        with EngineClient(engine.socket_path) as client:
            assert client.identify().engine_name == "spark"
    finally:
        engine.stop()
