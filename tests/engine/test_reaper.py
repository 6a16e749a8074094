"""What a killed command leaves in the workspace is cleaned up by the next command.

A real child process holds a run folder in the workspace as a command does, and is SIGKILLed;
the next `coord` command removes the folder and says so in one line. The engines side (a
sandbox or container of the killed command stopped) is proven with real engines in
tests/transform/test_engine_lifetime.py.
"""
from __future__ import annotations

import pytest

from tests.support.cli import coord, run_folder_holder


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    return tmp_path


@pytest.fixture
def holder(home):
    """A process holding a run folder of the workspace, as `coord pull x` does."""
    with run_folder_holder(home / ".coord" / "run", "coord", "pull", "x") as held:
        yield held


def test_the_next_command_removes_what_a_killed_command_left_and_says_so(home, holder):
    proc, folder = holder
    proc.kill()
    proc.wait()
    listed = coord("list", cwd=home)
    assert listed.stderr == f"coord: removed 1 run folder left by 1 dead command: pid {proc.pid} (pull x)\n"
    assert not folder.exists()
    assert coord("list", cwd=home).stderr == ""


def test_a_running_command_keeps_its_run_folder(home, holder):
    _, folder = holder
    assert coord("list", cwd=home).stderr == ""
    assert folder.is_dir()


def test_system_engines_says_when_none_runs(home, holder):
    assert coord("system", "engines", cwd=home).stdout == "no engines running for this workspace\n"
