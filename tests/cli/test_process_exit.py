"""The ``coord`` process ends without Python's module teardown (``cli.main.run``): its output
still arrives whole and its exit code is the command's."""
from __future__ import annotations

import subprocess
import sys

from coordinator.cli.main import cli


def coord_process(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_output_to_a_pipe_is_flushed_before_the_process_ends(tmp_path):
    proc = coord_process("--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == cli.get_help(cli.make_context("coord", ["--help"], resilient_parsing=True)) + "\n"


def test_exit_codes_are_the_commands(tmp_path):
    assert coord_process("init", str(tmp_path / "ws"), cwd=tmp_path).returncode == 0
    assert coord_process("list", cwd=tmp_path / "ws").returncode == 0
    failed = coord_process("-w", str(tmp_path / "nowhere"), "list", cwd=tmp_path)
    assert failed.returncode == 1 and failed.stderr.startswith("coord: error: ")
    assert coord_process("list", "--no-such-option", cwd=tmp_path).returncode == 2
