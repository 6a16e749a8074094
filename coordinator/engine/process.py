"""What both engine runtimes share: the process interface, the start error, the environment
and the labels an engine starts with.

Both runtimes run the same engine code (engines/spark) and expose it the same way: a gRPC unix
socket inside the engine's run folder, the only folder the engine may write to. The runtimes
(``sandbox``, ``container``) import this module; ``runtime`` imports them, never the reverse.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import Unavailable
from ..metadata.objects import EngineIdentity
from .settings import EngineSettings

if TYPE_CHECKING:
    from ..workspace import Workspace


class EngineStartError(Unavailable, RuntimeError):
    """The engine could not be started (its log's last lines are in the message)."""


class EngineProcess(Protocol):
    """A started engine of either runtime."""

    @property
    def socket_path(self) -> Path:
        """The engine's gRPC unix socket (EngineClient(socket_path))."""

    @property
    def identity(self) -> EngineIdentity:
        """Goes into every block this engine produces."""

    def stop(self) -> None:
        """Stops the engine; idempotent."""


SHARED_INPUTS_ENV = "ODF_ENGINE_INPUTS_ROOT"  # read by the engine (streaming.inputs_root)
LABEL_WORKSPACE = "io.odf.coordinator.workspace"
LABEL_INSTANCE = "io.odf.coordinator.workspace-instance"  # Workspace.instance_id: not a copy's
LABEL_RUN_ID = "io.odf.coordinator.run-id"


def engine_labels(ws: Workspace, run_id: str) -> dict[str, str]:
    """The labels of an engine started for run ``run_id`` of ``ws``: how a later command of
    that workspace, and of no copy of it, knows the engine for its own."""
    return {LABEL_WORKSPACE: str(ws.root), LABEL_INSTANCE: ws.instance_id, LABEL_RUN_ID: run_id}


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
