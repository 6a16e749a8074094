"""What the warm engine of ``coord serve`` may read, seen on the real sandbox's command line.

The workspace: ``t.people`` (root) read by ``t.long``; ``t.other``, a root nobody reads; and
a derivative with its input, both pulled from a repository, which the service does not
compute. The engine's datasets are the ``--ro-bind`` mounts of the ``bwrap`` process the
service starts, under the workspace's dataset folders; the service is killed as soon as they
are read (bwrap dies with it), so Spark never has to finish starting.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from coordinator.metadata.ids import DatasetRef
from coordinator.repository import add_repository, pull_from_repository, push_dataset
from coordinator.workspace import Workspace

from ..repository.conftest import make_derivative, make_root
from .conftest import Served, add_derivative, add_root, drop_csv, serving

pytestmark = pytest.mark.engine_start
SANDBOX = {"COORD_ENGINE_RUNTIME": "sandbox"}
PEOPLE, LONG, OTHER = "t.people", "t.long", "t.other"
UPSTREAM, SHARED = "org.example.events", "org.example.derived"


@pytest.fixture
def home(tmp_path) -> Path:
    other = Workspace.init(tmp_path / "other")
    shared = make_derivative(other, SHARED, make_root(other, UPSTREAM))
    add_repository(other, "r", (tmp_path / "repo").as_uri())
    for d in (UPSTREAM, SHARED):
        push_dataset(other, d, "r")
    ws = Workspace.init(tmp_path / "home")
    add_repository(ws, "r", (tmp_path / "repo").as_uri())
    for d in (UPSTREAM, SHARED):
        pull_from_repository(ws, DatasetRef.parse(f"r/{d}"))
    assert ws.dataset(SHARED).head() == shared.head()
    add_root(ws.root, PEOPLE, "people")
    add_root(ws.root, OTHER, "other")
    add_derivative(ws.root, LONG, [PEOPLE], "SELECT event_time, id, name FROM `t.people`")
    return ws.root


def engine_datasets(served: Served, timeout: float = 120) -> set[str]:
    """The datasets whose folders the sandbox the service started mounts read-only."""
    datasets = (served.home / ".coord" / "datasets").resolve()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for args in _children_command_lines(served.proc.pid):
            if Path(args[0]).name == "bwrap":
                mounted = [Path(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--ro-bind"]
                return {p.relative_to(datasets).parts[0] for p in mounted if p.is_relative_to(datasets)}
        assert served.proc.poll() is None, served.proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError(f"no engine started within {timeout} s")


def _children_command_lines(pid: int) -> list[list[str]]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"\nPPid:\t{pid}\n" in (entry / "status").read_text():
                found.append((entry / "cmdline").read_bytes().decode().rstrip("\0").split("\0"))
        except OSError:  # it ended meanwhile
            continue
    return found


def kill(served: Served) -> None:
    os.kill(served.proc.pid, signal.SIGKILL)  # the sandbox dies with it (--die-with-parent)
    served.proc.wait()


def test_the_warm_engine_reads_the_derivatives_it_computes_and_their_inputs_only(home):
    drop_csv(home / "people", "a.csv", [(1, "ann")])
    with serving(home, env=SANDBOX) as served:
        mounted = engine_datasets(served)
        kill(served)
    assert mounted == {PEOPLE, LONG}  # not t.other, nor the datasets pulled from the repository


def test_provenance_of_a_dataset_the_engine_cannot_read_gets_an_engine_that_can(home):
    block = Workspace.open(home).dataset(SHARED).head().hex()
    with serving(home, env=SANDBOX) as served:  # no file: nothing to compute, no engine yet
        asked = threading.Thread(target=_ask, args=(served, f"/api/datasets/{SHARED}/provenance",
                                                    {"block": block, "row": 0}), daemon=True)
        asked.start()
        mounted = engine_datasets(served)
        kill(served)
    assert mounted == {PEOPLE, LONG, SHARED, UPSTREAM}  # the service's, and what the replay reads


def _ask(served: Served, path: str, params: dict) -> None:
    try:
        served.get(path, params=params, timeout=600)
    except httpx.HTTPError:  # the service was killed while it answered
        pass
