"""Sharing a pipeline at once: push several datasets (``--all``, ``-r``), pull a derivative
with its inputs (``pull -r``), and what verify says when an input stayed behind.

The sharing itself is checked for a pipeline of either ODF version (``shared``: a root, a
derivative reading it and an unrelated root; a 0.39 one written with ``support.odf39_datasets``),
through a folder repository and, for the round trip, an S3 one; the rest on ODF 0.18."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import BATCHES, at, write_derivative, write_root, write_table_root
from ..support.tamper import flip_a_byte
from .conftest import make_derivative, make_root, with_repo

UP, DER, OTHER = "org.example.events", "org.example.derived", "org.example.unrelated"


def pipeline(ws, url):
    """A root, a derivative reading it and an unrelated root, in ``ws`` with repository ``shared``."""
    datasets(with_repo(ws, url))


def datasets(ws):
    """The 0.18 pipeline's datasets in ``ws``."""
    make_derivative(ws, DER, make_root(ws, UP, slices=2))
    make_root(ws, OTHER, slices=1)


def heads(ws, *ids):
    return {i: ws.dataset(i).head() for i in ids}


@dataclass(frozen=True)
class Shared:
    """A pipeline of one ODF version in ``ws``: root ``up``, derivative ``der`` reading it,
    unrelated root ``other``; ``blocks``: how many the root and the derivative each have."""

    ws: Workspace
    up: str
    der: str
    other: str
    blocks: int

    def workspace(self, root: Path) -> Workspace:
        """Another workspace of the same version."""
        return Workspace.init(root, self.ws.config().odf)

    def heads(self, ws: Workspace, *names: str) -> dict[str, object]:
        if ws.config().odf is OdfVersion.V039:
            return {n: CurrentDataset(ws, n).state().head for n in names}
        return heads(ws, *names)

    def exists(self, ws: Workspace, name: str) -> bool:
        return ws.odf_of(name) is not None


@pytest.fixture(params=[OdfVersion.V018, OdfVersion.V039], ids=["odf0.18", "odf0.39"])
def shared(request, tmp_path) -> Shared:
    ws = Workspace.init(tmp_path / "origin", request.param)
    if request.param is OdfVersion.V018:
        datasets(ws)
        return Shared(ws, UP, DER, OTHER, 3)
    folder, locks, scratch = ws.meta / "datasets", ws.meta / "locks", tmp_path / "scratch"
    write_derivative(folder / "large-cities", locks, scratch,
                     write_root(folder / "cities", locks, scratch, signer=ws.signing_key))
    town = pa.table({"event_time": pa.array([at(0)], pa.timestamp("ms", tz="UTC")), "town": ["Evora"]})
    write_table_root(ws, "towns", town, scratch)
    return Shared(ws, "cities", "large-cities", "towns", 3 + len(BATCHES))


def test_push_r_and_pull_r_carry_a_derivative_with_its_inputs_inputs_first(shared, repo_url, tmp_path):
    p = shared
    out = coord("push", "-r", p.der, "--to", "shared", cwd=with_repo(p.ws, repo_url).root).stdout
    assert [line.split(" (")[0] for line in out.splitlines()] == [
        f"{name}: pushed {p.blocks} blocks to shared/{name}" for name in (p.up, p.der)]
    again = coord("push", "-r", p.der, cwd=p.ws.root).stdout.splitlines()
    assert again == [f"{p.up}: shared/{p.up} is up to date", f"{p.der}: shared/{p.der} is up to date"]
    other = with_repo(p.workspace(tmp_path / "other"), repo_url)
    pulled = coord("pull", "-r", f"shared/{p.der}", cwd=other.root).stdout
    assert f"{p.der}: new dataset: pulling {p.blocks} blocks" in pulled
    assert f"{p.up}: new dataset: pulling {p.blocks} blocks" in pulled
    assert p.heads(other, p.up, p.der) == p.heads(p.ws, p.up, p.der)
    assert not p.exists(other, p.other)
    assert sorted(coord("pull", "--all", cwd=other.root).stdout.splitlines()) == sorted(
        [f"{p.up}: up to date", f"{p.der}: up to date"])


def test_push_all_takes_every_dataset_pushed_before_to_where_it_went(shared, tmp_path):
    p = shared
    with_repo(p.ws, (tmp_path / "repo").as_uri())
    coord("push", p.up, "--to", "shared", cwd=p.ws.root)
    coord("push", p.other, "--to", "shared/renamed", cwd=p.ws.root)
    out = coord("push", "--all", cwd=p.ws.root).stdout.splitlines()
    assert sorted(out) == sorted([f"{p.up}: shared/{p.up} is up to date",
                                  f"{p.other}: shared/renamed is up to date"])
    everything = coord("push", "--all", "--to", "shared", cwd=p.ws.root).stdout
    assert f"{p.der}: pushed {p.blocks} blocks to shared/{p.der}" in everything
    assert {d.name for d in (tmp_path / "repo").iterdir()} == {p.up, p.der, p.other, "renamed"}


def test_a_failed_push_skips_what_reads_it_and_the_others_go_on(shared, tmp_path):
    p = shared
    with_repo(p.ws, (tmp_path / "repo").as_uri())
    coord("push", p.up, "--to", "shared/taken", cwd=p.ws.root)
    # another dataset already sits under up's name in the repository: up's push diverges
    coord("push", p.other, "--to", f"shared/{p.up}", cwd=p.ws.root)
    done = coord("push", "-r", p.der, p.other, "--to", "shared", cwd=p.ws.root, check=False)
    assert done.returncode == 1
    assert f"{p.up}: failed: " in done.stdout
    assert f"{p.der}: skipped: it depends on {p.up}, which failed" in done.stdout
    assert f"{p.other}: pushed" in done.stdout
    assert done.stderr.startswith(f"coord: error: {p.up}: shared/{p.up} has blocks you don't")
    assert "(1 skipped: they depend on it)" in done.stderr
    assert not (tmp_path / "repo" / p.der).exists()


def test_several_datasets_need_a_repository_not_a_name(ws, tmp_path):
    pipeline(ws, (tmp_path / "repo").as_uri())
    bad = coord("push", UP, OTHER, "--to", "shared/one", cwd=ws.root, check=False)
    assert bad.returncode == 2 and "--to REPO/NAME names one dataset" in bad.stderr
    never = coord("push", "--all", cwd=ws.root, check=False)
    assert never.returncode == 2 and "no dataset has been pushed before" in never.stderr


def test_pull_r_keeps_an_input_the_workspace_has_of_its_own(ws, other_ws, tmp_path):
    url = (tmp_path / "repo").as_uri()
    pipeline(ws, url)
    coord("push", "-r", DER, "--to", "shared", cwd=ws.root)
    make_root(with_repo(other_ws, url), UP, slices=1)
    mine = other_ws.dataset(UP).head()
    out = coord("pull", "-r", f"shared/{DER}", cwd=other_ws.root).stdout
    assert f"{UP}:" not in out and other_ws.dataset(UP).head() == mine


def test_a_missing_input_pulled_from_nowhere_fails_and_is_named(shared, tmp_path):
    p = shared
    url = (tmp_path / "repo").as_uri()
    coord("push", p.der, "--to", "shared", cwd=with_repo(p.ws, url).root)  # without its input
    other = with_repo(p.workspace(tmp_path / "other"), url)
    done = coord("pull", "-r", f"shared/{p.der}", cwd=other.root, check=False)
    assert done.returncode == 1
    assert f"{p.der}: new dataset" in done.stdout
    assert done.stderr.startswith(f"coord: error: {p.up}: shared/{p.up}: no dataset there")


def test_verify_says_how_to_bring_an_input_that_stayed_behind(ws, other_ws, tmp_path):
    url = (tmp_path / "repo").as_uri()
    pipeline(ws, url)
    coord("push", "-r", DER, "--to", "shared", cwd=ws.root)
    coord("pull", f"shared/{DER}", cwd=with_repo(other_ws, url).root)
    done = coord("verify", DER, cwd=other_ws.root, check=False, fake_engine=True)
    assert done.returncode == 1
    assert f"reproducibility: not checked (input {UP} is not in this workspace)" in done.stdout
    assert (f"cannot replay: input {UP} is not in this workspace; `coord pull -r shared/{DER}` "
            "brings a dataset's inputs with it") in done.stdout + done.stderr


def repository_file(tmp_path, dataset_id, folder):
    """One file of a dataset in the folder repository ``tmp_path/repo``."""
    return sorted((tmp_path / "repo" / dataset_id / folder).rglob("*"))[0]


@pytest.mark.parametrize("folder", ["data", "meta/blocks", "checkpoint"])
def test_push_repair_uploads_again_what_the_repository_holds_damaged(ws, other_ws, tmp_path, folder):
    url = (tmp_path / "repo").as_uri()
    pipeline(ws, url)
    coord("push", "-r", DER, "--to", "shared", cwd=ws.root)
    damaged = repository_file(tmp_path, DER, folder)
    while damaged.is_dir():
        damaged = sorted(damaged.iterdir())[0]
    flip_a_byte(damaged, at=min(100, damaged.stat().st_size - 1))
    assert coord("push", DER, cwd=ws.root).stdout.strip() == f"shared/{DER} is up to date"
    out = coord("push", DER, "--repair", cwd=ws.root).stdout
    assert out.startswith(f"repaired 1 damaged file of shared/{DER} (1 file, ")
    assert coord("push", DER, "--repair", cwd=ws.root).stdout.strip() == \
        f"every file shared/{DER} holds is intact"
    coord("pull", "-r", f"shared/{DER}", cwd=with_repo(other_ws, url).root)
    assert coord("verify", "--integrity", DER, cwd=other_ws.root).returncode == 0
