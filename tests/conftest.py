"""Shared fixtures: a fresh workspace and a way to run the real ``coord`` command."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from coordinator.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "tests" / "fixtures" / "manifests"


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


def derivative_manifest(dataset_id: str, inputs: list[str], query: str) -> str:
    """A manifest of a Spark SQL derivative (one query step)."""
    return f"""\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {dataset_id}
  source:
    kind: derivative
    inputs: [{", ".join(inputs)}]
    transform: {{kind: sql, engine: spark, query: "{query}"}}
"""


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


def coord(*args: str, cwd: Path, env: dict | None = None, check: bool = True,
          fake_engine: bool = False) -> subprocess.CompletedProcess:
    """Run the real CLI in a child process (so it can be killed, locked out, etc.); with
    ``fake_engine`` every engine it opens is the DuckDB one of tests/fake_engine.py."""
    proc = subprocess.run(_coord_command(args, fake_engine), cwd=cwd, env=_coord_env(env),
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"coord {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def coord_started(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """Start the real CLI in a child process and return at once (to kill it at some moment)."""
    return subprocess.Popen(_coord_command(args), cwd=cwd, env=_coord_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _coord_command(args, fake_engine: bool = False) -> list[str]:
    return [sys.executable, "-m", "tests.fake_engine" if fake_engine else "coordinator.cli", *args]


def _coord_env(env: dict | None) -> dict:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("COORD_WORKSPACE", None)
    full_env["PYTHONPATH"] = str(ROOT)  # this checkout, whatever an editable install points at
    return full_env


_RUN_FOLDER_HOLDER = """
import sys, time
from pathlib import Path
from coordinator.workspace.runs import run_folder
run_root, sys.argv = Path(sys.argv[1]), sys.argv[2:]
with run_folder(run_root, "engine") as path:
    print(path, flush=True)
    time.sleep(600)
"""


@contextmanager
def run_folder_holder(run_root: Path, *argv: str) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A child process holding a new run folder under ``run_root`` with ``argv`` as its command
    line, as a running command does: (process, folder). Killed when the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", _RUN_FOLDER_HOLDER, str(run_root), *argv],
                            stdout=subprocess.PIPE, text=True, env=_coord_env(None))
    try:
        yield proc, Path(proc.stdout.readline().strip())
    finally:
        proc.kill()
        proc.wait()
