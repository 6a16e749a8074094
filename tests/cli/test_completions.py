"""``coord completions SHELL``: the shell completes commands, options and dataset ids."""
from __future__ import annotations

import subprocess

import pytest

from tests.support.cli import MANIFESTS, coord, coord_command, coord_env

ORDERS = "com.example.orders"


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    coord("add", str(MANIFESTS), cwd=tmp_path)
    return tmp_path


def completed(home, words: str, cword: int) -> list[str]:
    """What coord answers the shell asking to complete word ``cword`` of ``words``."""
    env = coord_env({"_COORD_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    proc = subprocess.run(coord_command([]), cwd=home, env=env, capture_output=True, text=True, check=True)
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line]


def test_commands_complete(home):
    assert completed(home, "coord pu", 1) == ["publish", "pull", "push"]


def test_dataset_ids_complete_from_the_workspace(home):
    assert completed(home, "coord tail com.example.orders", 2) == [ORDERS, f"{ORDERS}.daily"]
    assert completed(home, "coord pull --all com.example.orders.d", 3) == [f"{ORDERS}.daily"]


def test_outside_a_workspace_nothing_is_offered_and_nothing_fails(tmp_path):
    assert completed(tmp_path, "coord tail com", 2) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_for_each_shell_asks_coord(tmp_path, shell):
    script = coord("completions", shell, cwd=tmp_path).stdout
    assert "_COORD_COMPLETE" in script


def test_bash_loads_the_script_and_completes_through_it(home):
    script = coord("completions", "bash", cwd=home).stdout
    coord_shim = home / "bin" / "coord"
    coord_shim.parent.mkdir()
    coord_shim.write_text("#!/bin/sh\nexec " + " ".join(coord_command([])) + ' "$@"\n')
    coord_shim.chmod(0o755)
    probe = (script + '\nCOMP_WORDS=(coord tail com.example.orders.d); COMP_CWORD=2; '
             '_coord_completion coord; printf "%s\\n" "${COMPREPLY[@]}"\n')
    env = coord_env({"PATH": f"{coord_shim.parent}:/usr/bin:/bin"})
    out = subprocess.run(["bash", "-c", probe], cwd=home, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [f"{ORDERS}.daily"]
