"""The `container` engine runtime (docs/architecture.md, Engines): the Spark engine's OCI image,
run through the Docker Engine API (the `docker` SDK; here Podman's API service answers it).

What the container gets:
- no network (`network_mode="none"`: only its own loopback), unless ``settings.allow_network``;
- the run folder read-write and every input path read-only, each mounted at the *same* path
  as on the host, so paths in requests mean the same file inside and out;
- a read-only root file system with a tmpfs on /tmp, and no capabilities;
- the image's environment (its Dockerfile) and ``runtime.engine_environment``: nothing of the
  coordinator's environment, and of the host's files only the mounts above;
- the coordinator's own uid:gid, so whatever the engine writes in the run folder belongs to
  the coordinator's user;
- gRPC on ``RUN_DIR/engine.sock``: a unix socket in the bind-mounted run folder is the same
  inode on both sides, so the host connects to it with no network at all;
- the coordinator's lease (``RUN_DIR/lease``, a lock is the same on both sides too): the engine
  exits once it is free, and the container is removed when it exits (auto-remove), so a
  SIGKILLed coordinator leaves no container; the engine's output goes to ``RUN_DIR/engine.log``,
  which outlives the container for the error message of a failed start;
- labels naming the workspace and run it belongs to (``runtime.LABEL_*``), how a later
  command finds the engines of a workspace (``engine_containers``).

``allow_network`` gives ``network_mode="host"``, not a bridge: Podman's default bridge hands out
private-range addresses (forbidden on these machines), and the one reason to open the network
is reaching a Spark master (standalone/YARN/Kubernetes), which a bridge behind NAT breaks anyway.
It is an explicit opt-in; the file system stays confined by the mounts either way, and the
identity records ``network_isolated=False`` in every block it produced.
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.metadata.objects import EngineIdentity
from coordinator.workspace.config import DEFAULT_SPARK_MASTER

from .client import socket_target
from .process import LABEL_INSTANCE, LABEL_WORKSPACE, EngineStartError, engine_environment, shared_inputs_dir

if TYPE_CHECKING:
    from coordinator.workspace import Workspace

log = logging.getLogger(__name__)

DEFAULT_API_SOCKET = "/run/coord-podman/podman.sock"
IMAGE_REPOSITORY = "localhost/odf-spark-engine"
ENGINE_PORT = 5544
SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
# Spark's session start is 6-10 s on an idle machine; leave room for a busy shared one.
# (settings.startup_timeout, when the settings have one, wins.)
READY_TIMEOUT_S = 180.0
# Podman's default rlimits fail here ("error setting rlimit ... operation not permitted"):
# explicit limits on every container are required, nproc at most 32768.
ULIMITS = {"nofile": 20000, "nproc": 32768}
# Labels written by engines/spark/Dockerfile.
LABEL_VERSION = "io.odf.engine.version"
LABEL_SPARK_VERSION = "io.odf.spark.version"
LABEL_RUN_DIR = "io.odf.coordinator.run-dir"



class ContainerEngineError(EngineStartError):
    """The container runtime is unusable or the engine did not start; the message says why."""


def api_url(socket: str | os.PathLike | None = None) -> str:
    """The API endpoint: argument, else $COORD_CONTAINER_HOST, else $DOCKER_HOST, else the
    socket engines/spark/podman-setup.sh starts."""
    url = str(socket) if socket else (
        os.environ.get("COORD_CONTAINER_HOST")
        or os.environ.get("DOCKER_HOST")
        or DEFAULT_API_SOCKET
    )
    return url if "://" in url else f"unix://{url}"


def _client(socket=None, timeout: int = 120):
    """A client of the API; one that does not answer is a ``ContainerEngineError`` (the SDK
    asks the API's version as it connects)."""
    import docker  # lazy: importing this module must stay cheap and dependency-light

    try:
        return docker.DockerClient(base_url=api_url(socket), timeout=timeout)
    except docker.errors.DockerException as e:
        raise ContainerEngineError(f"no container API at {api_url(socket)} ({e}); start one with "
                                   "engines/spark/podman-setup.sh, or set engine.runtime: sandbox") from e


def container_api_available(socket: str | os.PathLike | None = None) -> bool:
    """True if a Docker-compatible API answers a ping (within a few seconds). Never raises."""
    try:
        client = _client(socket, timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False


def image_available(image: str | None = None, socket: str | os.PathLike | None = None) -> bool:
    """True if the API answers and has the engine image (for runtime "auto"). Never raises."""
    try:
        client = _client(socket, timeout=3)
        try:
            client.images.get(image or default_image())
            return True
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - no API or no image: not available
        return False


def default_image() -> str:
    """``localhost/odf-spark-engine:<engine version>``, the tag build-image.sh gives."""
    init = Path(__file__).resolve().parents[2] / "engines/spark/odf_spark_engine/__init__.py"
    version = "0.1.0"
    try:
        m = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", init.read_text(), re.M)
        version = m.group(1) if m else version
    except OSError:
        pass
    return f"{IMAGE_REPOSITORY}:{version}"


def container_name(run_dir: Path, labels: Mapping[str, str] | None = None) -> str:
    """One container per run folder and owner (its labels): a stale one from a killed
    coordinator is found by name, and no other workspace's at the same path is."""
    owner = "".join(f"\0{k}={v}" for k, v in sorted((labels or {}).items()))
    digest = hashlib.sha256(f"{run_dir}{owner}".encode()).hexdigest()[:12]
    stem = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_dir.name)[:32].strip("-.") or "run"
    return f"odf-engine-{stem}-{digest}"


@dataclass(eq=False)  # identity semantics: kept in a set of live containers
class ContainerEngineProcess:
    """A running engine container; satisfies the runtime's EngineProcess interface
    (``socket_path``, ``identity``, ``stop()``)."""

    socket_path: Path
    identity: EngineIdentity
    name: str
    _container: Any = field(repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopped: bool = False

    @property
    def container_id(self) -> str:
        return self._container.id

    def logs(self, tail: int = 200) -> str:
        return _logs(self._container, self.socket_path.parent / LOG_NAME, tail)

    def stop(self, timeout: int = 5) -> None:
        """Stop and remove the container. Idempotent; best-effort after the first error."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        _live.discard(self)
        stop_container(self._container, timeout)
        try:
            self.socket_path.unlink(missing_ok=True)
        except OSError:
            pass

    def __enter__(self) -> ContainerEngineProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# Containers are removed when the interpreter exits, however the caller forgot to stop them.
# (A SIGKILLed coordinator runs no atexit hook: then the engine sees its lease free and exits.)
_live: set[ContainerEngineProcess] = set()


@atexit.register
def _stop_all() -> None:
    for proc in list(_live):
        try:
            proc.stop(timeout=2)
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


def start_container(
    settings, run_dir: Path, read_only_paths: list[Path], *,
    lease: Path | None = None, labels: Mapping[str, str] | None = None,
) -> ContainerEngineProcess:
    """Start the engine image and wait until its gRPC socket answers.

    ``settings`` is an EngineSettings (read duck-typed: ``spark_master``, ``spark_conf``,
    ``allow_network``, ``image``, ``startup_timeout``).
    """
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    sock = run_dir / SOCKET_NAME  # bound by the engine relative to its folder: any length
    sock.unlink(missing_ok=True)  # a stale socket would look ready

    master = getattr(settings, "spark_master", None) or DEFAULT_SPARK_MASTER
    conf = dict(getattr(settings, "spark_conf", None) or {})
    isolated = not bool(getattr(settings, "allow_network", False))
    image_ref = getattr(settings, "image", None) or default_image()
    timeout = float(getattr(settings, "startup_timeout", None) or READY_TIMEOUT_S)

    client = _client()
    try:
        client.ping()
    except Exception as e:  # noqa: BLE001
        raise ContainerEngineError(
            f"no container API at {api_url()} ({e}); start one with engines/spark/podman-setup.sh, "
            "or set engine.runtime: sandbox"
        ) from e

    import docker

    try:
        image = client.images.get(image_ref)
    except docker.errors.ImageNotFound:
        raise ContainerEngineError(
            f"engine image {image_ref} not found; build it with `make engine-image` "
            "(engines/spark/build-image.sh)"
        ) from None
    image_labels = image.labels or {}
    image_id = image.id if image.id.startswith("sha256:") else f"sha256:{image.id}"

    name = container_name(run_dir, labels)
    try:
        _remove(client.containers.get(name))
    except docker.errors.NotFound:
        pass

    command = ["--socket", str(sock), "--log-file", str(run_dir / LOG_NAME), "--master", master]
    keep_warm = float(getattr(settings, "keep_warm", 0.0) or 0.0)
    if lease is not None:
        command += ["--lease", str(Path(lease).resolve())]
        if keep_warm:
            command += ["--keep-warm", f"{keep_warm:g}"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    if isolated:
        # The container's own loopback: no clash between engines, reachable by `podman exec`.
        # (On the host network a fixed port would collide between concurrent pulls.)
        command += ["--port", str(ENGINE_PORT)]

    shared = shared_inputs_dir(settings, run_dir)
    container = client.containers.run(
        image.id,  # by ID: what runs is exactly what the identity names, even if re-tagged
        command=command,
        name=name,
        detach=True,
        init=True,
        network_mode="none" if isolated else "host",
        volumes=_volumes(run_dir, read_only_paths, shared),
        user=f"{os.getuid()}:{os.getgid()}",
        read_only=True,
        cap_drop=["ALL"],  # the engine needs none; root in the container then is just a uid
        tmpfs={"/tmp": "rw,nosuid,nodev,mode=1777"},
        environment=engine_environment(shared),  # added to the image's, nothing of ours
        ulimits=[_ulimit(n, v) for n, v in ULIMITS.items()],
        labels={**(labels or {}), LABEL_RUN_DIR: str(run_dir)},
        auto_remove=True,
    )
    identity = EngineIdentity(
        runtime="container",
        version=image_labels.get(LABEL_VERSION),
        spark_version=image_labels.get(LABEL_SPARK_VERSION),
        image_digest=image_id,
        spark_master=master,
        network_isolated=isolated,
    )
    proc = ContainerEngineProcess(socket_path=sock, identity=identity, name=name,
                                  _container=container)
    if not keep_warm:  # a warm engine outlives this process: it ends by its leases
        _live.add(proc)
    try:
        _wait_ready(container, sock, timeout)
    except BaseException:
        proc.stop(timeout=1)
        raise
    return proc


def _volumes(run_dir: Path, read_only_paths, shared: Path | None) -> dict:
    # Same path inside as outside. Podman mounts parents before children, so a run folder
    # inside a read-only workspace is still writable.
    volumes = {str(run_dir): {"bind": str(run_dir), "mode": "rw"}}
    if shared is not None:
        volumes[str(shared)] = {"bind": str(shared), "mode": "rw"}
    for p in read_only_paths:
        p = Path(p).resolve()
        if not p.exists():
            raise ContainerEngineError(f"read-only path does not exist: {p}")
        volumes.setdefault(str(p), {"bind": str(p), "mode": "ro"})
    return volumes


def _ulimit(name: str, value: int):
    import docker

    return docker.types.Ulimit(name=name, soft=value, hard=value)


def _wait_ready(container, sock: Path, timeout: float) -> None:
    import docker
    import grpc

    deadline = time.monotonic() + timeout
    while True:
        try:
            container.reload()
            status = container.status
        except docker.errors.NotFound:  # exited and auto-removed
            status = "removed"
        if status in ("exited", "dead", "removing", "removed"):
            raise ContainerEngineError(
                f"engine container {container.name} exited before its socket was ready "
                f"(status {status}); logs:\n{_logs(container, sock.parent / LOG_NAME)}"
            )
        left = deadline - time.monotonic()
        if left <= 0:
            raise ContainerEngineError(
                f"engine container {container.name} not ready after {timeout:.0f} s "
                f"(no answer on {sock}); logs:\n{_logs(container, sock.parent / LOG_NAME)}"
            )
        if sock.exists():
            channel = grpc.insecure_channel(socket_target(sock))
            try:
                grpc.channel_ready_future(channel).result(timeout=min(1.0, left))
                return
            except grpc.FutureTimeoutError:
                pass
            finally:
                channel.close()
        else:
            time.sleep(0.2)


def _logs(container, log_file: Path | None = None, tail: int = 200) -> str:
    """The container's own output (what it printed before the engine took its log file, if
    it still exists) followed by the end of the engine's log file."""
    parts = []
    try:
        parts.append(container.logs(tail=tail).decode(errors="replace").rstrip())
    except Exception as e:  # noqa: BLE001 - logs are for the error message only
        log.debug("logs of %s: %s", container.name, e)
    if log_file is not None and log_file.exists():
        parts.append("\n".join(log_file.read_text(errors="replace").splitlines()[-tail:]))
    return "\n".join(p for p in parts if p) or "(no output)"


def engine_containers(ws: Workspace) -> list:
    """The engine containers (running or not) labelled with that workspace (its path and
    instance id: not a copy's); none when no container API answers within a few seconds. One
    client: connecting asks the API's version, which Podman takes a second or two to answer."""
    try:
        client = _client(timeout=3)
    except Exception:  # noqa: BLE001 - no API: no containers
        return []
    try:
        client.api.timeout = 10
        return workspace_containers(client, ws.root, ws.instance_id)
    finally:
        client.close()


def workspace_containers(client, workspace: Path, instance: str | None = None) -> list:
    """The containers labelled with that workspace (and instance id, if given), as ``client``
    lists them. A container
    removed between the listing and its inspection is simply gone: Docker answers that with
    404, which the SDK skips (``ignore_removed``), Podman with 500 "no such container", after
    which the listing is asked again."""
    import docker

    labels = [f"{LABEL_WORKSPACE}={workspace}", *([f"{LABEL_INSTANCE}={instance}"] if instance else [])]
    attempts = 3
    while True:
        try:
            return client.containers.list(all=True, ignore_removed=True, filters={"label": labels})
        except docker.errors.APIError as e:
            attempts -= 1
            if not attempts or "no such container" not in str(e.explanation or "").lower():
                raise


def engine_container(name: str):
    """The container of that name, or None when there is none."""
    import docker

    try:
        return _client(timeout=10).containers.get(name)
    except docker.errors.NotFound:
        return None


def stop_container(container, timeout: int = 5) -> None:
    """Stop (SIGTERM via the init, SIGKILL after ``timeout`` s) and remove; never raises."""
    try:
        container.stop(timeout=timeout)
    except Exception as e:  # noqa: BLE001 - already gone is fine; removal below decides
        log.debug("stopping %s: %s", container.name, e)
    _remove(container)


def _remove(container) -> None:
    try:
        container.remove(force=True)
    except Exception as e:  # noqa: BLE001 - gone already, or the API is down: nothing to do
        log.debug("removing %s: %s", getattr(container, "name", container), e)
