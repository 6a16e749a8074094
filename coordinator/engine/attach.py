"""Commands sharing one running engine instead of each starting its own.

An engine is started with the folders it may read and one run folder it may write (see
``runtime``); nothing in a request can widen that. So a running engine can serve any later
command whose inputs lie inside the folders it was given: the command connects to the
engine's socket and works in a folder of its own inside the engine's run folder. That saves
Spark's start (10-20 s) on every command after the first.

``EngineEndpoint`` is what a command needs to know of such an engine; it is written next to
the engine (``write``) by whoever started it and read by the commands that attach. The
endpoint's owner starts and stops the engine; a command attached to it never stops it.
Who may start one and how long it lives is the owner's policy: the test suite's shared
engine (tests/support/engines.py) uses it today.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ..metadata.objects import EngineIdentity
from ..workspace.fsutil import atomic_write, remove


@dataclass(frozen=True)
class EngineEndpoint:
    """A running engine as seen by the commands that attach to it."""

    socket_path: Path  # its gRPC unix socket
    run_dir: Path  # the one folder it may write; each attached command works in a subfolder
    readable: tuple[Path, ...]  # the folders it was started with read-only access to
    identity: EngineIdentity  # recorded in the blocks it computes

    def write(self, path: Path) -> None:
        doc = {"socket": str(self.socket_path), "run_dir": str(self.run_dir),
               "readable": [str(p) for p in self.readable], "identity": asdict(self.identity)}
        atomic_write(path, json.dumps(doc).encode())

    @classmethod
    def read(cls, path: Path) -> EngineEndpoint:
        doc = json.loads(path.read_bytes())
        return cls(Path(doc["socket"]), Path(doc["run_dir"]), tuple(Path(p) for p in doc["readable"]),
                   EngineIdentity(**doc["identity"]))

    def can_read(self, path: Path) -> bool:
        path = path.resolve()
        return any(path.is_relative_to(root.resolve()) for root in self.readable)


@dataclass(frozen=True)
class _Attached:
    """The ``EngineProcess`` of an engine someone else runs: stopping it is not ours to do."""

    socket_path: Path
    identity: EngineIdentity

    def stop(self) -> None:
        pass


@contextmanager
def attached_engine(endpoint: EngineEndpoint, read_only_paths: list[Path]) -> Iterator:
    """The ``Engine`` of a running engine, for a command that reads ``read_only_paths``; its
    work folders live in a fresh subfolder of the engine's run folder, removed at the end.
    A path the engine was not started with cannot be read there: that is refused up front,
    naming it, rather than failing inside Spark."""
    from .client import GrpcEngine  # gRPC: only once an engine is needed
    from .port import EngineUnavailable

    unreadable = [p for p in read_only_paths if not endpoint.can_read(p)]
    if unreadable:
        raise EngineUnavailable(f"the running engine cannot read {unreadable[0]}: it was started "
                          f"with {', '.join(map(str, endpoint.readable))} only")
    work = endpoint.run_dir / f"attached-{uuid.uuid4().hex[:12]}"
    work.mkdir()
    try:
        with GrpcEngine(_Attached(endpoint.socket_path, endpoint.identity), work) as engine:
            yield engine
    finally:
        remove(work)
