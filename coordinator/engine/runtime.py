"""Starting an engine in the configured runtime (sandbox or container, see ``process`` for
what both share).

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
from types import ModuleType

from .process import EngineProcess, EngineStartError
from .sandbox import start_sandbox
from .settings import EngineSettings


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
    container = container_runtime()
    if runtime == "auto":
        usable = (container is not None and container.container_api_available()
                  and container.image_available(settings.image))
        runtime = "container" if usable else "sandbox"
    if runtime == "container":
        if container is None:
            raise EngineStartError("the container runtime is not available in this build")
        return container.start_container(settings, run_dir, read_only_paths, lease=lease, labels=labels)
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


def container_runtime() -> ModuleType | None:
    """The container runtime module, or None when it is not part of this build."""
    name = f"{__package__}.container"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the module exists but something it needs is missing
            raise
        return None
