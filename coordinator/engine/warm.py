"""A warm engine: the workspace's engine outlives the command that started it, for the next ones.

Spark takes 10-20 s to start, far longer than most commands' work. With ``engine.keepWarm``
(seconds, default 120; 0 turns this off) the first command that needs an engine starts it in
``.coord/run/warm/`` and leaves it running; the workspace's next commands attach to it
(``attach.attached_engine``: each works in a folder of its own inside the engine's run folder).

The folder ``.coord/run/warm/``:
- ``leases/``: one file per command using the engine, exclusively ``flock``ed by that command
  while it does (the kernel drops the lock however the command ends). The folder itself is
  locked by a command deciding whether to use the engine;
- ``endpoint.json`` (``attach.EngineEndpoint``) and ``engine.json`` (how it was started: the
  settings' fingerprint, the runtime and its process or container, the keep-warm time);
- the engine's socket and log, and the commands' work folders.

What it may read: the workspace's datasets folder (``.coord/datasets``), read-only, so that it
serves any later command, one that reads a dataset added after it started included. That is
wider than an engine of one command, which sees only the datasets that command computes and
their inputs (``session.engine_reads``); it still sees no key, config, cache or file outside
``.coord``. ``engine.keepWarm: 0`` keeps each engine to its command's datasets.

Invariants:
- The engine ends once no lease has been held for ``keepWarm`` seconds (it watches the leases
  itself, engines/spark/odf_spark_engine/lease.py), so however its commands end (SIGKILL
  included) no engine is left more than ``keepWarm`` after the last one.
- It ends only after taking the folder lock and finding no lease held: a command that found it
  answering under that lock, with its own lease taken, is never left with an engine on its way
  out.
- A command uses the warm engine only if it was started with the same settings (runtime,
  Spark master and settings, network, image, engine code) and can read every folder the
  command needs. Otherwise, if no other command is using it, it is replaced by one that can
  read what both needed; if another command is using it, this command starts an engine of its
  own that ends with it (``session.open_engine``), as without keep-warm.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ..workspace.fsutil import atomic_write, remove
from ..workspace.runs import take_lease
from .attach import EngineEndpoint
from .settings import EngineSettings

WARM = "warm"  # the folder in the workspace's run folder, and the run id in engine labels
LEASES = "leases"
ENDPOINT = "endpoint.json"
STARTED = "engine.json"
ANSWER_TIMEOUT_S = 5.0  # an engine busy with another command's query still answers Identify


@dataclass(frozen=True)
class WarmStatus:
    """What ``coord system engines`` says of the warm engine."""

    commands: int  # commands using it now
    keep_warm: float  # seconds it stays up after the last one


class WarmLease:
    """This command's hold on the warm engine; ``release()`` (or leaving ``with``) lets go."""

    def __init__(self, endpoint: EngineEndpoint, fd: int, path: Path):
        self.endpoint, self._fd, self._path = endpoint, fd, path

    def release(self) -> None:
        if self._fd >= 0:
            self._path.unlink(missing_ok=True)  # while still holding it: nobody sees it free first
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> WarmLease:
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def acquire(run_root: Path, settings: EngineSettings, readable: list[Path],
            labels: Mapping[str, str]) -> WarmLease | None:
    """The warm engine for a command that reads ``readable``, started if needed; None when
    another command is using a warm engine this one cannot use (see the module doc)."""
    folder = run_root / WARM
    leases = folder / LEASES
    leases.mkdir(parents=True, exist_ok=True)
    guard = os.open(leases, os.O_RDONLY)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)  # commands decide one at a time (see the module doc)
        fd, path = _take_lease(leases)
        try:
            fingerprint = _fingerprint(settings)
            current = _running(folder)
            if current is not None:
                endpoint, started = current
                if started.get("fingerprint") == fingerprint and all(endpoint.can_read(p) for p in readable):
                    _remove_work_folders(folder, others_using=_others_using(leases, path))
                    return WarmLease(endpoint, fd, path)
                if _others_using(leases, path):
                    os.close(fd)
                    path.unlink(missing_ok=True)
                    return None
                _stop(started)
                if started.get("fingerprint") == fingerprint:  # the same engine, reading more
                    readable = [*endpoint.readable, *readable]
            endpoint = _start(folder, settings, readable, labels, fingerprint)
            return WarmLease(endpoint, fd, path)
        except BaseException:
            path.unlink(missing_ok=True)
            os.close(fd)
            raise
    finally:
        os.close(guard)


def status(run_root: Path) -> WarmStatus | None:
    """The warm engine's use, if one is running."""
    folder = run_root / WARM
    current = _running(folder, answer=False)
    if current is None:
        return None
    leases = folder / LEASES
    using = sum(_held(p) for p in leases.iterdir()) if leases.is_dir() else 0
    return WarmStatus(using, float(current[1].get("keep_warm", 0)))


def _take_lease(leases: Path) -> tuple[int, Path]:
    path = leases / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a new file nobody else knows: never blocks
    return fd, path


def _others_using(leases: Path, mine: Path) -> bool:
    return any(p != mine and _held(p) for p in leases.iterdir())


def _held(lease: Path) -> bool:
    fd = take_lease(lease)
    if fd is None:
        return lease.exists()
    os.close(fd)
    return False


def _running(folder: Path, *, answer: bool = True) -> tuple[EngineEndpoint, dict] | None:
    """The warm engine's endpoint and start record, if one is there (and, with ``answer``,
    answers within a few seconds)."""
    try:
        endpoint = EngineEndpoint.read(folder / ENDPOINT)
        started = json.loads((folder / STARTED).read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not endpoint.socket_path.exists() or not _process_alive(started):
        return None
    if answer:
        from .client import EngineClient  # gRPC: only once an engine is needed
        from .port import EngineError

        try:
            with EngineClient(endpoint.socket_path) as client:
                client.wait_ready(timeout=ANSWER_TIMEOUT_S)
        except EngineError:
            _stop(started)  # there but not answering: hung, or on its way out
            return None
    return endpoint, started


def _start(folder: Path, settings: EngineSettings, readable: list[Path], labels: Mapping[str, str],
           fingerprint: str) -> EngineEndpoint:
    from .runtime import start_engine
    from .sandbox import SandboxEngine

    for stale in (folder / ENDPOINT, folder / STARTED):
        stale.unlink(missing_ok=True)
    _remove_work_folders(folder, others_using=False)
    paths = sorted({p.resolve() for p in readable})
    process = start_engine(settings, folder, paths, lease=folder / LEASES, labels=labels)
    handle = ({"pid": process.process.pid} if isinstance(process, SandboxEngine)
              else {"container": getattr(process, "name", "")})
    endpoint = EngineEndpoint(process.socket_path, folder.resolve(), tuple(paths), process.identity)
    atomic_write(folder / STARTED, json.dumps({
        "fingerprint": fingerprint, "runtime": process.identity.runtime, "keep_warm": settings.keep_warm,
        "started": time.time(), **handle}).encode())
    endpoint.write(folder / ENDPOINT)
    return endpoint


def _process_alive(started: dict) -> bool:
    """False when the start record names a sandbox process that is gone (an engine that ended
    leaves its socket file, which would only time out); a container is asked through its socket."""
    return "pid" not in started or _warm_sandbox(int(started["pid"]))


def _warm_sandbox(pid: int) -> bool:
    """Whether ``pid`` is a warm engine's sandbox (never another process that got its PID)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return any(a.endswith(f"/{WARM}/{LEASES}".encode()) for a in argv)


def _stop(started: dict) -> None:
    """Stops the warm engine a start record names."""
    if "pid" in started:
        pid = int(started["pid"])
        if _warm_sandbox(pid):
            try:
                os.kill(pid, signal.SIGKILL)  # bwrap: the engine's PID namespace ends with it
            except ProcessLookupError:
                pass
    elif started.get("container"):
        from . import container

        try:
            found = container.engine_container(started["container"])
        except container.ContainerEngineError:
            return
        if found is not None:
            container.stop_container(found)


def _remove_work_folders(folder: Path, *, others_using: bool) -> None:
    """The work folders of commands that ended without removing theirs (killed ones)."""
    if others_using:
        return  # theirs are among them; a later command cleans up
    for work in folder.glob("attached-*"):
        remove(work)


def _fingerprint(settings: EngineSettings) -> str:
    """What makes two engines interchangeable: their settings and, in the sandbox, the engine's
    code (the container's is its image)."""
    doc = asdict(settings)
    doc.pop("keep_warm")
    doc.pop("startup_timeout")
    if settings.runtime != "container":
        from .sandbox import engine_files_hash

        doc["files_hash"] = engine_files_hash()
    return json.dumps(doc, sort_keys=True)
