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
- A command attaches to, stops or signals only an engine this workspace started: the record
  must name this workspace's path and instance id (``Workspace.instance_id``, which a copy of
  the workspace does not share), the engine's socket and run folder must be this warm folder
  (resolved: a folder whose path leads out of the workspace's ``.coord`` is not used), a
  sandbox's PID must be a ``bwrap`` running the engine on this folder's leases that started
  when the record says, and a container must carry this workspace's labels. A record that
  fails is ignored (a note at ``-v``), as if there were no warm engine: so a ``cp -a`` copy
  of a workspace, or a crafted record, never stops another workspace's engine or an
  unrelated process or container.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..workspace import Workspace
from ..workspace.fsutil import atomic_write, remove
from ..workspace.layout import RUN
from ..workspace.runs import take_lease
from .attach import EngineEndpoint
from .process import LABEL_INSTANCE, LABEL_WORKSPACE, engine_labels
from .settings import EngineSettings

log = logging.getLogger(__name__)

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


def acquire(ws: Workspace, settings: EngineSettings, readable: list[Path]) -> WarmLease | None:
    """The warm engine of ``ws`` for a command that reads ``readable``, started if needed; None
    when another command is using a warm engine this one cannot use, or when the warm folder
    leads out of the workspace (see the module doc)."""
    folder = _place(ws)
    if folder is None:
        log.info("not using a warm engine: %s leads out of the workspace", ws.run_dir / WARM)
        return None
    leases = folder / LEASES
    leases.mkdir(parents=True, exist_ok=True)
    labels = engine_labels(ws, WARM)
    guard = os.open(leases, os.O_RDONLY)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)  # commands decide one at a time (see the module doc)
        fd, path = _take_lease(leases)
        try:
            fingerprint = _fingerprint(settings)
            current = _running(folder, labels)
            if current is not None:
                endpoint, started = current
                if started.get("fingerprint") == fingerprint and all(endpoint.can_read(p) for p in readable):
                    _remove_work_folders(folder, others_using=_others_using(leases, path))
                    return WarmLease(endpoint, fd, path)
                if _others_using(leases, path):
                    os.close(fd)
                    path.unlink(missing_ok=True)
                    return None
                _stop(folder, labels, started)
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


def status(ws: Workspace) -> WarmStatus | None:
    """The warm engine's use, if one of this workspace is running."""
    folder = _place(ws)
    if folder is None or (current := _running(folder, engine_labels(ws, WARM), answer=False)) is None:
        return None
    leases = folder / LEASES
    using = sum(_held(p) for p in leases.iterdir()) if leases.is_dir() else 0
    return WarmStatus(using, float(current[1].get("keep_warm", 0)))


def _place(ws: Workspace) -> Path | None:
    """The warm folder, resolved; None when a link takes it out of the workspace's run folder."""
    folder = (ws.run_dir / WARM).resolve()
    return folder if folder == ws.meta.resolve() / RUN / WARM else None


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


def _running(folder: Path, labels: dict[str, str], *,
             answer: bool = True) -> tuple[EngineEndpoint, dict] | None:
    """The warm engine's endpoint and start record, if the record names an engine of this
    workspace that is still there (and, with ``answer``, answers within a few seconds)."""
    try:
        endpoint = EngineEndpoint.read(folder / ENDPOINT)
        started = json.loads((folder / STARTED).read_bytes())
        ours = _ours(folder, labels, endpoint, started)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not ours or not endpoint.socket_path.exists():
        return None
    if answer:
        from .client import EngineClient  # gRPC: only once an engine is needed
        from .port import EngineError

        try:
            with EngineClient(endpoint.socket_path) as client:
                client.wait_ready(timeout=ANSWER_TIMEOUT_S)
        except EngineError:
            _stop(folder, labels, started)  # there but not answering: hung, or on its way out
            return None
    return endpoint, started


def _ours(folder: Path, labels: dict[str, str], endpoint: EngineEndpoint, started: dict) -> bool:
    """Whether the record names an engine this workspace started that may still run; a record
    that names anything else is noted and ignored (see the module doc). A container's labels
    are asked only before it is stopped (``_stop``): its socket in this folder answering is
    what a command attaches to."""
    owner = (labels[LABEL_WORKSPACE], labels[LABEL_INSTANCE])
    if (started.get("workspace"), started.get("instance")) != owner:
        return _ignored(folder, "it was written in another workspace (a copy's, or before a move)")
    if endpoint.run_dir != folder or endpoint.socket_path.parent != folder:
        return _ignored(folder, f"its engine works in {endpoint.run_dir}, not in this workspace")
    if "pid" not in started:
        return bool(started.get("container")) or _ignored(folder, "it names no engine")
    pid = int(started["pid"])
    argv = _cmdline(pid)
    if argv is None:
        return False  # ended: an engine that ended leaves its socket file, which would only time out
    if not _our_sandbox(pid, argv, folder, started.get("pid_start")):
        return _ignored(folder, f"process {pid} is not its engine")
    return True


def _ignored(folder: Path, why: str) -> bool:
    log.info("ignoring the warm engine record %s: %s", folder / STARTED, why)
    return False


def _cmdline(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return None


def _started_at(pid: int) -> int | None:
    """When the process started (clock ticks after boot): with the PID, names one process ever."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after the command name, which may hold anything
    return int(fields[19])  # field 22 of proc(5); fields[0] is field 3


def _our_sandbox(pid: int, argv: list[bytes], folder: Path, started_at: object) -> bool:
    """Whether ``pid`` is the bwrap of the engine started on ``folder``'s leases at ``started_at``."""
    try:
        lease = argv[argv.index(b"--lease") + 1]
    except (ValueError, IndexError):
        return False
    return (Path(os.fsdecode(argv[0])).name == "bwrap" and b"odf_spark_engine.server" in argv
            and lease == os.fsencode(folder / LEASES) and _started_at(pid) == started_at)


def _start(folder: Path, settings: EngineSettings, readable: list[Path], labels: dict[str, str],
           fingerprint: str) -> EngineEndpoint:
    from .runtime import start_engine
    from .sandbox import SandboxEngine

    for stale in (folder / ENDPOINT, folder / STARTED):
        stale.unlink(missing_ok=True)
    _remove_work_folders(folder, others_using=False)
    paths = sorted({p.resolve() for p in readable})
    process = start_engine(settings, folder, paths, lease=folder / LEASES, labels=labels)
    handle: dict[str, Any] = (
        {"pid": process.process.pid, "pid_start": _started_at(process.process.pid)}
        if isinstance(process, SandboxEngine) else {"container": getattr(process, "name", "")})
    endpoint = EngineEndpoint(process.socket_path, folder, tuple(paths), process.identity)
    atomic_write(folder / STARTED, json.dumps({
        "fingerprint": fingerprint, "runtime": process.identity.runtime, "keep_warm": settings.keep_warm,
        "started": time.time(), "workspace": labels[LABEL_WORKSPACE], "instance": labels[LABEL_INSTANCE],
        **handle}).encode())
    endpoint.write(folder / ENDPOINT)
    return endpoint


def _stop(folder: Path, labels: dict[str, str], started: dict) -> None:
    """Stops the warm engine a start record names, once it is found to be this workspace's."""
    if "pid" in started:
        pid = int(started["pid"])
        argv = _cmdline(pid)
        if argv is not None and _our_sandbox(pid, argv, folder, started.get("pid_start")):
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
        if found is None:
            return
        expected = {**labels, container.LABEL_RUN_DIR: str(folder)}
        if any((found.labels or {}).get(k) != v for k, v in expected.items()):
            _ignored(folder, f"container {started['container']} is not its engine")
            return
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
