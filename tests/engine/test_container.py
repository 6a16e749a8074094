"""The `container` runtime against real Podman and the real engine image.

The session fixture installs Podman and builds the image itself (engines/spark/podman-setup.sh,
engines/spark/build-image.sh): a cold build takes a few minutes, a cached one seconds.
"""
from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from coordinator.engine import container as ctr
from coordinator.engine.client import EngineClient
from coordinator.engine.container import ContainerEngineError, container_api_available, start_container
from coordinator.engine.settings import EngineSettings


def _settings(**overrides) -> EngineSettings:
    # The default image name: build-image.sh must tag what EngineSettings names.
    values = dict(runtime="container", spark_master="local[1]",
                  spark_conf={"spark.ui.enabled": "false"})
    return EngineSettings(**(values | overrides))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A workspace mounted read-only with the run folder inside it (mounted read-write):
    the nested layout the coordinator uses."""
    ws = tmp_path_factory.mktemp("ws")
    (ws / "inputs").mkdir()
    (ws / "inputs" / "data.txt").write_text("input bytes\n")
    return ws


@pytest.fixture(scope="module")
def engine(engine_image, workspace):
    proc = start_container(_settings(), workspace / "run", [workspace])
    yield proc
    proc.stop()


def _exec(proc, script: str) -> tuple[int, str]:
    # The podman CLI rather than the API's exec: under load the API's exec attach can return
    # before the output arrives, leaving it empty.
    done = subprocess.run(["podman", "exec", proc._container.name, "sh", "-c", script],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.container
def test_grpc_socket_answers_from_the_host(engine, workspace):
    assert engine.socket_path == workspace / "run" / "engine.sock"
    assert engine.socket_path.is_socket()
    reply = _identify(engine.socket_path)
    assert reply.engine_name == "spark"
    assert reply.engine_version == engine.identity.version
    assert reply.spark_version == engine.identity.spark_version
    assert reply.spark_master == engine.identity.spark_master == "local[1]"


def _identify(sock: Path):
    with EngineClient(sock) as client:
        return client.identify()


@pytest.mark.container
def test_identity_names_the_built_image(engine, engine_image):
    _, digest = engine_image
    ident = engine.identity
    assert ident.runtime == "container"
    assert ident.image_digest == digest and digest.startswith("sha256:") and len(digest) == 71
    assert ident.network_isolated is True
    assert ident.spark_master == "local[1]"
    assert ident.spark_version and ident.version
    engine._container.reload()
    assert engine._container.attrs["Image"].removeprefix("sha256:") == digest[len("sha256:"):]


@pytest.mark.container
def test_container_has_no_network(engine):
    # A server on the host's loopback: reachable from the host, not from the container.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # control
        code, out = _exec(engine, f"""python3 - <<'EOF'
import os, socket
print(sorted(os.listdir("/sys/class/net")))
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("CONNECTED")
except OSError as e:
    print("FAILED", type(e).__name__)
EOF""")
    assert code == 0, out
    assert out.split("\n")[:2] == ["['lo']", "FAILED ConnectionRefusedError"], out
    engine._container.reload()
    assert engine._container.attrs["HostConfig"]["NetworkMode"] == "none"


@pytest.mark.container
def test_mounts_read_only_inputs_and_writable_run_folder(engine, workspace):
    data = workspace / "inputs" / "data.txt"
    code, out = _exec(engine, f"cat {data}")
    assert (code, out) == (0, "input bytes\n")

    code, out = _exec(engine, f"echo x > {workspace}/inputs/new.txt")
    assert code != 0 and "Read-only file system" in out
    assert not (workspace / "inputs" / "new.txt").exists()
    code, out = _exec(engine, "touch /usr/new.txt")
    assert code != 0 and "Read-only file system" in out

    # Written inside, owned by (and readable for) the coordinator's user outside.
    out_file = workspace / "run" / "out.txt"
    code, out = _exec(engine, f"echo written > {out_file}")
    assert code == 0, out
    assert out_file.read_text() == "written\n"
    assert (out_file.stat().st_uid, out_file.stat().st_gid) == (os.getuid(), os.getgid())


@pytest.mark.container
def test_ulimits(engine):
    code, out = _exec(engine, "ulimit -n; grep 'Max processes' /proc/self/limits")
    assert code == 0, out
    nofile, nproc = out.splitlines()
    assert nofile == "20000"
    assert nproc.split()[2:4] == ["32768", "32768"]


@pytest.mark.container
def test_stale_container_replaced_network_allowed_stop_removes(engine_image, tmp_path):
    # One engine start (about 10 s) covers three things.
    run_dir = (tmp_path / "run").resolve()
    run_dir.mkdir()
    # What a SIGKILLed coordinator leaves behind: a container with the run folder's name.
    client = ctr._client()
    stale = client.containers.run(
        engine_image[1], entrypoint=["sleep", "600"], command=[], detach=True,
        name=ctr.container_name(run_dir), network_mode="none", ulimits=_ulimits())
    proc = start_container(_settings(allow_network=True), run_dir, [])
    try:
        assert proc.container_id != stale.id
        assert proc.identity.network_isolated is False
        proc._container.reload()
        assert proc._container.attrs["HostConfig"]["NetworkMode"] == "host"
        assert _identify(proc.socket_path).engine_name == "spark"
    finally:
        proc.stop()
    proc.stop()  # idempotent
    assert not proc.socket_path.exists()
    assert not {stale.name, proc.name} & _container_names()


@pytest.mark.container
def test_engine_exiting_early_fails_with_its_logs(engine_image, tmp_path):
    client = ctr._client()
    c = client.containers.run(
        engine_image[1], entrypoint=["sh", "-c", "echo engine says boom >&2; exit 3"],
        command=[], detach=True, network_mode="none", ulimits=_ulimits())
    try:
        with pytest.raises(ContainerEngineError, match="(?s)exited before.*engine says boom"):
            ctr._wait_ready(c, tmp_path / "engine.sock", timeout=60)
    finally:
        ctr._remove(c)


@pytest.mark.container
def test_missing_image_says_how_to_build_it(engine_image, tmp_path):
    with pytest.raises(ContainerEngineError, match="make engine-image"):
        start_container(_settings(image="localhost/odf-spark-engine:no-such-tag"), tmp_path, [])


def test_api_unavailable_is_false_not_an_error(tmp_path):
    assert container_api_available(f"unix://{tmp_path}/nothing.sock") is False


def _ulimits():
    return [ctr._ulimit(n, v) for n, v in ctr.ULIMITS.items()]


def _container_names() -> set[str]:
    return {c.name for c in ctr._client().containers.list(all=True, ignore_removed=True)}
