"""What crashed commands leave, found and cleaned up: the engines and run folders of a workspace.

A command killed with SIGKILL (a crash, an OOM kill) runs no cleanup code. Its engine ends by
itself (it watches the command's lease, see engine/runtime.py), but its run folder stays, and
an engine may still be on its way out. Every command that opens the workspace calls ``reap``:
for each run folder whose lease is free (workspace/runs.py) it stops the engines of that run,
then removes the folder. A live command's run folder and engine are never touched.

Engines are found from outside, so that even one whose run folder was deleted by hand shows:
containers by their labels (``runtime.LABEL_*``), sandboxed engines by the ``bwrap`` process
whose command line names a lease in the workspace's run folder (its engine dies with it).

Every command calls ``reap``, and nearly always there is nothing to reap: the engine modules
(``warm``, ``process``) are imported only when a dead command's run folder is found.
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..workspace.runs import AbandonedRunFolder, abandoned_run_folders, run_folder_held

if TYPE_CHECKING:
    from ..workspace import Workspace
    from .warm import WarmStatus


@dataclass
class Engine:
    runtime: str  # "container" or "sandbox"
    name: str  # the container's name, or the sandbox's PID
    run_id: str  # the run folder it was started for ("warm": the workspace's warm engine)
    alive: bool  # the command that started it still runs (holds the run folder's lease)
    _handle: object = None  # the container, or the PID of the sandbox's bwrap
    warm: WarmStatus | None = None  # the warm engine's use (warm.py)

    def stop(self) -> None:
        if self.runtime == "container":
            from . import container  # gRPC and the docker SDK: only when there is work

            container.stop_container(self._handle)
        else:
            assert isinstance(self._handle, int)
            try:
                os.kill(self._handle, signal.SIGKILL)  # bwrap: the engine dies with it
            except ProcessLookupError:
                pass


@dataclass
class Reaped:
    folders: list[AbandonedRunFolder]
    engines: list[Engine]

    def __str__(self) -> str:
        owners = ", ".join(
            f"pid {f.owner['pid']} ({' '.join(f.owner.get('argv', [])[1:])})" if f.owner else "unknown"
            for f in self.folders
        )
        stopped = f" and stopped {_count(len(self.engines), 'engine')}" if self.engines else ""
        return (f"removed {_count(len(self.folders), 'run folder')}{stopped} left by "
                f"{_count(len(self.folders), 'dead command')}: {owners}")


def engines(ws: Workspace) -> list[Engine]:
    """The engines of this workspace, running or on their way out, in both runtimes."""
    # gRPC and the docker SDK: only when engines are looked for
    from . import container, warm
    from .process import LABEL_RUN_ID

    found = []
    warm_status = warm.status(ws)
    for c in container.engine_containers(ws):
        run_id = c.labels.get(LABEL_RUN_ID, "?")
        found.append(Engine("container", c.name, run_id, _alive(ws, run_id), c))
    for pid, lease in _sandbox_processes(ws):
        run_id = lease.parent.name
        found.append(Engine("sandbox", str(pid), run_id, _alive(ws, run_id), pid))
    for e in found:
        e.warm = warm_status if e.run_id == warm.WARM else None
    return sorted(found, key=lambda e: (e.run_id, e.runtime, e.name))


def _alive(ws: Workspace, run_id: str) -> bool:
    # a warm engine outlives its commands by design: it ends by itself (warm.py)
    from . import warm

    return run_id == warm.WARM or run_folder_held(ws.run_dir / run_id)


def reap(ws: Workspace) -> Reaped | None:
    """Stops the engines and removes the run folders that dead commands left; None if none."""
    with abandoned_run_folders(ws.run_dir) as folders:
        if not folders:
            return None
        dead = {f.path.name for f in folders}
        stopped = [e for e in engines(ws) if e.run_id in dead]
        for engine in stopped:
            engine.stop()
        return Reaped(folders, stopped)


def _sandbox_processes(ws: Workspace) -> list[tuple[int, Path]]:
    """(PID of bwrap, lease path) of every sandboxed engine started for this workspace."""
    prefix = f"{ws.run_dir}/"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if Path(argv[0]).name != "bwrap" or "odf_spark_engine.server" not in argv or "--lease" not in argv:
            continue
        lease = argv[argv.index("--lease") + 1] if argv.index("--lease") + 1 < len(argv) else ""
        if lease.startswith(prefix):
            found.append((int(entry.name), Path(lease)))
    return found


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
