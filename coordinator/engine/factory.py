"""The one place an ``Engine`` comes from.

``open_engine`` starts the engine of the settings' runtime (``sandbox`` or ``container``;
``auto`` picks, see ``runtime.start_engine``) and hands it out as a ``port.Engine`` over gRPC;
leaving the ``with`` block closes the connection and stops the engine.

A program embedding the coordinator (the test suite's DuckDB engine, tests/support/fake_engine.py)
may put another implementation in place for the whole process with ``use_engine``: every
engine the process opens afterwards comes from that opener, whatever the workspace's settings
say. Nothing in the coordinator itself calls it, so a workspace cannot select it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .settings import EngineSettings

if TYPE_CHECKING:  # the port: imported when an engine is opened, not by every command
    from .port import Engine

# (settings, run folder, read-only paths) -> a context giving an engine that writes only
# into the run folder and reads only those paths
EngineOpener = Callable[[EngineSettings, Path, list[Path]], "AbstractContextManager[Engine]"]

_opener: EngineOpener | None = None


def use_engine(opener: EngineOpener | None) -> None:
    """Every engine this process opens from now on comes from ``opener`` (None: the runtimes)."""
    global _opener
    _opener = opener


def overridden() -> bool:
    """True when ``use_engine`` put another implementation in place for this process."""
    return _opener is not None


@contextmanager
def open_engine(
    settings: EngineSettings, run_dir: Path, read_only_paths: list[Path], *,
    lease: Path | None = None, labels: Mapping[str, str] | None = None,
) -> Iterator[Engine]:
    """An engine that may write only ``run_dir`` and read only ``read_only_paths`` (besides
    its own code); it exits by itself once nobody holds ``lease``; ``labels`` name it."""
    if _opener is not None:
        with _opener(settings, run_dir, read_only_paths) as engine:
            yield engine
        return
    from .client import GrpcEngine  # gRPC: only once an engine is needed
    from .runtime import running_engine

    with running_engine(settings, run_dir, read_only_paths, lease=lease, labels=labels) as process:
        with GrpcEngine(process, run_dir) as engine:
            yield engine
