"""Sharing a current-ODF (0.39) pipeline at once, as ``test_push_pull_many.py`` does for ODF
0.18: ``push --all``, ``push -r`` and ``pull -r`` bring a derivative's inputs (through a
folder and an S3 repository), a failed push skips what reads it, and a missing input fails the
pull with exit 1 naming it. The pipeline is written with the 0.39 dataset helpers
(``support.odf39_datasets``): root ``cities``, derivative ``large-cities`` over it, and an
unrelated root ``towns``."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord_here
from ..support.odf39_datasets import BATCHES, at, write_derivative, write_root, write_table_root
from .conftest import with_repo

UP, DER, OTHER = "cities", "large-cities", "towns"
# every block of each: Seed, source or transform, schema, one data block per batch
BLOCKS = 3 + len(BATCHES)


def current_ws(root: Path) -> Workspace:
    return Workspace.init(root, odf=OdfVersion.V039)


@pytest.fixture
def ws(tmp_path) -> Workspace:
    """A 0.39 workspace holding the pipeline."""
    ws = current_ws(tmp_path / "origin")
    folder, locks, scratch = ws.meta / "datasets", ws.meta / "locks", tmp_path / "scratch"
    root = write_root(folder / UP, locks, scratch, signer=ws.signing_key)
    write_derivative(folder / DER, locks, scratch, root)
    write_table_root(ws, OTHER, pa.table({"event_time": pa.array([at(0)], pa.timestamp("ms", tz="UTC")),
                                          "town": ["Evora"]}), scratch)
    return ws


@pytest.fixture
def other(tmp_path) -> Workspace:
    return current_ws(tmp_path / "other")


def heads(ws: Workspace, *names: str) -> dict[str, object]:
    return {n: CurrentDataset(ws, n).state().head for n in names}


def test_push_r_and_pull_r_carry_a_derivative_with_its_input(ws, other, repo_url):
    out = coord_here("push", "-r", DER, "--to", "shared", cwd=with_repo(ws, repo_url).root).stdout
    assert [line.split(" (")[0] for line in out.splitlines()] == [
        f"{UP}: pushed {BLOCKS} blocks to shared/{UP}", f"{DER}: pushed {BLOCKS} blocks to shared/{DER}"]
    pulled = coord_here("pull", "-r", f"shared/{DER}", cwd=with_repo(other, repo_url).root).stdout
    assert f"{DER}: new dataset: pulling {BLOCKS} blocks" in pulled
    assert f"{UP}: new dataset: pulling {BLOCKS} blocks" in pulled
    assert heads(other, UP, DER) == heads(ws, UP, DER)
    assert not CurrentDataset(other, OTHER).exists()


def test_push_all_takes_every_dataset_pushed_before_to_where_it_went(ws, tmp_path):
    with_repo(ws, (tmp_path / "repo").as_uri())
    coord_here("push", UP, "--to", "shared", cwd=ws.root)
    coord_here("push", OTHER, "--to", "shared/renamed", cwd=ws.root)
    out = coord_here("push", "--all", cwd=ws.root).stdout.splitlines()
    assert sorted(out) == [f"{UP}: shared/{UP} is up to date", f"{OTHER}: shared/renamed is up to date"]
    everything = coord_here("push", "--all", "--to", "shared", cwd=ws.root).stdout
    assert f"{DER}: pushed {BLOCKS} blocks to shared/{DER}" in everything
    assert {p.name for p in (tmp_path / "repo").iterdir()} == {UP, DER, OTHER, "renamed"}


def test_a_failed_push_skips_what_reads_it_and_exits_1(ws, tmp_path):
    with_repo(ws, (tmp_path / "repo").as_uri())
    coord_here("push", OTHER, "--to", f"shared/{UP}", cwd=ws.root)  # another dataset under UP's name
    done = coord_here("push", "-r", DER, "--to", "shared", cwd=ws.root, check=False)
    assert done.returncode == 1
    assert f"{UP}: failed: " in done.stdout
    assert f"{DER}: skipped: it depends on {UP}, which failed" in done.stdout
    assert not (tmp_path / "repo" / DER).exists()


def test_pull_r_of_a_derivative_whose_input_stayed_behind_fails_naming_it(ws, other, tmp_path):
    url = (tmp_path / "repo").as_uri()
    coord_here("push", DER, "--to", "shared", cwd=with_repo(ws, url).root)  # without its input
    done = coord_here("pull", "-r", f"shared/{DER}", cwd=with_repo(other, url).root, check=False)
    assert done.returncode == 1
    assert f"{DER}: new dataset" in done.stdout
    assert done.stderr.startswith(f"coord: error: {UP}: shared/{UP}: no dataset there")
