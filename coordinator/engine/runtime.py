"""Starting an engine in the configured runtime.

Both runtimes run the same engine code (engines/spark) and expose it the same way: a gRPC unix
socket inside the engine's run folder, the only folder the engine may write to.

An engine never outlives the process that started it: given a ``lease`` (a file the caller
holds an exclusive ``flock`` on, see coordinator/workspace/runs.py) the engine watches it and
exits once it is free, in both runtimes. ``labels`` name the engine's container (the workspace
and run it belongs to), so that a later command can find and stop it; a sandboxed engine is
found by the run folder in its command line.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from ..errors import CoordError
from ..metadata.objects import EngineIdentity
from .settings import EngineSettings


class EngineStartError(CoordError, RuntimeError):
    """The engine could not be started (its log's last lines are in the message)."""


class EngineProcess(Protocol):
    socket_path: Path  # the engine's gRPC unix socket (EngineClient(socket_path))
    identity: EngineIdentity  # goes into every block this engine produces

    def stop(self) -> None:
        """Stops the engine; idempotent."""


SHARED_INPUTS_ENV = "ODF_ENGINE_INPUTS_ROOT"  # read by the engine (streaming.inputs_root)
LABEL_WORKSPACE = "io.odf.coordinator.workspace"
LABEL_RUN_ID = "io.odf.coordinator.run-id"


def shared_inputs_dir(settings: EngineSettings, run_dir: Path) -> Path | None:
    """With a cluster master the executors run outside the engine's sandbox or container and
    cannot see its private /tmp: the engine then stages its inputs in this folder, mounted
    writable at the same path (per workspace; the engine adds the output dataset's id)."""
    if settings.spark_master.startswith("local"):
        return None
    shared = run_dir.resolve().parent / "engine-inputs"
    shared.mkdir(exist_ok=True)
    return shared


def engine_environment(shared_inputs: Path | None) -> dict[str, str]:
    """The environment every engine starts with, in both runtimes: this explicit list and
    nothing of the coordinator's (its variables may hold credentials, and a query must not
    depend on them). Each runtime adds where its Python and Java are: the sandbox PATH,
    PYTHONPATH and JAVA_HOME; the container its image's (engines/spark/Dockerfile)."""
    environment = {
        "HOME": "/tmp",  # Spark and Ivy want a home; the real one is not there
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONDONTWRITEBYTECODE": "1",  # the engine's code is read-only
    }
    if shared_inputs is not None:
        environment[SHARED_INPUTS_ENV] = str(shared_inputs)
    return environment


def start_engine(
    settings: EngineSettings, run_dir: Path, read_only_paths: list[Path], *,
    lease: Path | None = None, labels: Mapping[str, str] | None = None,
) -> EngineProcess:
    """Starts an engine that can write only to ``run_dir`` and read ``read_only_paths``
    (inputs, previous checkpoints) besides its own code. Returns once it answers requests.
    It exits by itself once nobody holds ``lease`` (a file in ``run_dir``).

    ``auto`` picks the container runtime when a container API answers and has the engine
    image, else the sandbox."""
    runtime = settings.runtime
    container = _container_runtime()
    if runtime == "auto":
        usable = (container is not None and container.container_api_available()
                  and container.image_available(settings.image))
        runtime = "container" if usable else "sandbox"
    if runtime == "container":
        if container is None:
            raise EngineStartError("the container runtime is not available in this build")
        return container.start_container(settings, run_dir, read_only_paths, lease=lease, labels=labels)
    from .sandbox import start_sandbox

    return start_sandbox(settings, run_dir, read_only_paths, lease=lease)


@contextmanager
def running_engine(
    settings: EngineSettings, run_dir: Path, read_only_paths: list[Path], *,
    lease: Path | None = None, labels: Mapping[str, str] | None = None,
) -> Iterator[EngineProcess]:
    """``with running_engine(...) as engine:`` stops the engine however the block ends."""
    engine = start_engine(settings, run_dir, read_only_paths, lease=lease, labels=labels)
    try:
        yield engine
    finally:
        engine.stop()


def _container_runtime():
    """The container runtime module, or None when it is not part of this build."""
    name = f"{__package__}.container"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the module exists but something it needs is missing
            raise
        return None
