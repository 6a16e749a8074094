"""Shared fixtures: a fresh workspace, the engine each test may use, a browser, the engine's
container image; and the markers that say which of these resources a test needs.

Markers (``make test-fast`` leaves out every test that has one):
- ``spark``: runs Spark SQL in its worker's one shared sandboxed engine (tests/support/engines.py);
- ``engine_start``: starts engines of its own (start, lifetime, isolation, runtimes, cluster, serve);
- ``container``: needs Podman and the engine image (given to tests using ``engine_image``);
- ``browser``: drives Debian's chromium (given to tests using ``browser``).
A test with neither ``spark`` nor ``engine_start`` that opens an engine fails. Under xdist the
tests of one module that run Spark stay on one worker, so the module's fixtures (pipelines
pulled through Spark) are built once; each worker has its own shared engine.
"""
from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import settings

from coordinator.engine import factory, session
from coordinator.workspace import Workspace

from .support import engines
from .support.cli import ROOT

ENGINE_MARKERS = ("spark", "engine_start", "container")
NO_CONTAINER_API = "unix:///nonexistent/coord-tests-start-no-engine.sock"

# Property tests: 100 examples each by default (Hypothesis's own default; what CI runs),
# HYPOTHESIS_PROFILE=thorough for 1000 after a change to a codec, an order or a hash, quick for
# 25 while working on something else. No deadline: the machines are shared and their timing
# is noise.
settings.register_profile("suite", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.register_profile("quick", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


@pytest.hookimpl(tryfirst=True)  # before xdist's hook, which turns the group into the test's id
def pytest_collection_modifyitems(items):
    for item in items:
        if "engine_image" in item.fixturenames:
            item.add_marker("container")
        if "browser" in item.fixturenames:
            item.add_marker("browser")
        if any(item.get_closest_marker(name) for name in ENGINE_MARKERS):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    _costliest_modules_first(items)


def _costliest_modules_first(items) -> None:
    """Modules whose tests start engines, then those running Spark, then the rest: xdist hands
    out its work units (a module's Spark tests, or one test) in this order after those with more
    tests, so the minute-long single tests (a cluster, a kill, a container) start early and the
    many short ones fill both workers up to the end, instead of one long test running alone on
    one worker while the other has finished. Whole modules move, in their own order, so that no
    module fixture is built twice."""
    def rank(item) -> int:
        if item.get_closest_marker("engine_start") or item.get_closest_marker("container"):
            return 0
        return 1 if item.get_closest_marker("spark") else 2

    module_rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        module_rank[module] = min(module_rank.get(module, 2), rank(item))
    items.sort(key=lambda item: module_rank[item.nodeid.split("::")[0]])  # stable


@pytest.fixture(scope="session")
def shared_engine(tmp_path_factory):
    """The endpoint file of this worker's one sandboxed engine, which may read every test folder."""
    with engines.start_shared_engine(tmp_path_factory.getbasetemp().resolve()) as endpoint_file:
        yield endpoint_file


@pytest.fixture(scope="module", autouse=True)
def _module_engine(request):
    """The engine a module's fixtures get (they run before any test's ``_test_engine``): the one
    its module-level markers choose, so a module fixture of a ``spark`` module pulls through
    the shared engine and one of an unmarked module may open none."""
    starts = any(item.get_closest_marker("engine_start") or item.get_closest_marker("container")
                 for item in request.session.items if item.module is request.module)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _choose_engine(request, monkeypatch, hide_containers=not starts)
        yield


@pytest.fixture(autouse=True)
def _test_engine(request, monkeypatch):
    """The engine this test's commands get, here and in the ``coord`` processes it runs."""
    _choose_engine(request, monkeypatch)
    engines.refusals.clear()
    yield
    assert not engines.refusals, engines.REFUSAL


def _choose_engine(request, monkeypatch, *, hide_containers: bool = True) -> None:
    """``hide_containers``: a mode other than ``own`` also sees no container API (for a
    module, only when none of its tests starts engines: their module fixtures may)."""
    if request.node.get_closest_marker("engine_start") or request.node.get_closest_marker("container"):
        mode = "own"
    elif request.node.get_closest_marker("spark"):
        mode = f"attach:{request.getfixturevalue('shared_engine')}"
    else:
        mode = "none"
    monkeypatch.setenv(engines.ENV, mode)
    if mode != "own" and hide_containers:
        # No container API either: the next command after a killed one looks for the killed
        # one's containers (engine/reaper.py), and a machine's Podman takes seconds to answer.
        monkeypatch.setenv("COORD_CONTAINER_HOST", NO_CONTAINER_API)
    # An engine a test starts ends with its command, unless the test asks for a warm one
    # (COORD_ENGINE_KEEP_WARM="" in a command's env: the workspace's engine.keepWarm).
    monkeypatch.setenv("COORD_ENGINE_KEEP_WARM", "0")
    monkeypatch.setattr(factory, "_opener", engines.opener_for(mode))
    if mode == "own":
        monkeypatch.setattr(session, "engine_settings", engines.with_test_spark_conf(session.engine_settings))


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium driven by Playwright (``make system-deps`` installs it; no
    ``playwright install``). Flags keep it off this machine's closed network."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        yield b
        b.close()


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace.init(tmp_path / "ws")


SPARK_DIR = ROOT / "engines" / "spark"


def _run_script(name: str) -> str:
    proc = subprocess.run(
        ["bash", str(SPARK_DIR / name)], capture_output=True, text=True, timeout=3600,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        pytest.fail(f"{name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def engine_image():
    """(API socket, image digest): Podman's API service running and the engine image built.

    The scripts install Podman and build the image themselves: a cold build takes a few
    minutes, a cached one seconds."""
    sock = _run_script("podman-setup.sh")
    digest = _run_script("build-image.sh")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COORD_CONTAINER_HOST", f"unix://{sock}")
        yield sock, digest
