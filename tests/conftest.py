"""Shared fixtures: a fresh workspace and a way to run the real ``coord`` command."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "tests" / "fixtures" / "manifests"


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace.init(tmp_path / "ws")


def coord(*args: str, cwd: Path, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the real CLI in a child process (so it can be killed, locked out, etc.)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("COORD_WORKSPACE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"coord {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc
