"""Every command that reads or ships a dataset, run on a current-ODF (0.39) root and derivative
of a default workspace through the CLI: each works (exit 0). None may fall back to the ODF 0.18
door's refusal ("does not handle yet", ``workspace.dataset.CurrentOdfDataset``), which says
nothing a user can act on. (``coord provenance`` needs the Spark engine: its tests are
``tests/lineage``'s.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord_here
from ..support.odf39_datasets import QUERY, define_derivative, write_root

COMMANDS = [
    ["list"], ["status"], ["status", "big", "-o", "json"], ["log", "big"], ["log", "big", "--builds"],
    ["schema", "big"], ["tail", "big"], ["diff", "big"], ["lineage", "big"],
    ["lineage", "big", "-o", "html"], ["lineage", "big", "--fields"],
    ["verify", "-r", "big"], ["verify", "--integrity", "big"],
    ["sql", "-c", "SELECT count(*) FROM big"], ["push", "-r", "big", "--to", "shared"],
    ["publish", "cities", "--to-feed", "FEED"],
]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A 0.39 workspace: the root ``cities`` and the derivative ``big`` pulled from it."""
    home = tmp_path_factory.mktemp("current-commands")
    ws = Workspace.init(home, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch")
    define_derivative(ws, "big", {"cities": CurrentDataset(ws, "cities").state().id}, QUERY)
    coord_here("pull", "big", cwd=home, fake_engine=True)
    coord_here("repo", "add", "shared", (home / "repo").as_uri(), cwd=home)
    return home


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_the_command_works_on_current_odf_datasets(home, argv):
    argv = [a.replace("FEED", (home / "feed").as_uri() + "/") for a in argv]
    done = coord_here(*argv, cwd=home, fake_engine=True, check=False)
    assert "does not handle yet" not in done.stderr
    assert done.returncode == 0, done.stderr
