"""Sharing a pipeline at once: push several datasets (``--all``, ``-r``), pull a derivative
with its inputs (``pull -r``), and what verify says when an input stayed behind."""
from __future__ import annotations

import pytest

from ..support.cli import coord
from ..support.tamper import flip_a_byte
from .conftest import make_derivative, make_root, with_repo

UP, DER, OTHER = "org.example.events", "org.example.derived", "org.example.unrelated"


def pipeline(ws, url):
    """A root, a derivative reading it and an unrelated root, in ``ws`` with repository ``shared``."""
    up = make_root(with_repo(ws, url), UP, slices=2)
    make_derivative(ws, DER, up)
    make_root(ws, OTHER, slices=1)


def heads(ws, *ids):
    return {i: ws.dataset(i).head() for i in ids}


def test_push_r_uploads_a_derivative_with_its_inputs_inputs_first(ws, tmp_path):
    pipeline(ws, (tmp_path / "repo").as_uri())
    out = coord("push", "-r", DER, "--to", "shared", cwd=ws.root).stdout.splitlines()
    assert [line.split(":")[0] for line in out] == [UP, DER]
    assert out[0].startswith(f"{UP}: pushed 3 blocks to shared/{UP}")
    again = coord("push", "-r", DER, cwd=ws.root).stdout.splitlines()
    assert again == [f"{UP}: shared/{UP} is up to date", f"{DER}: shared/{DER} is up to date"]


def test_push_all_takes_every_dataset_pushed_before_to_where_it_went(ws, tmp_path):
    pipeline(ws, (tmp_path / "repo").as_uri())
    coord("push", UP, "--to", "shared", cwd=ws.root)
    coord("push", OTHER, "--to", "shared/renamed", cwd=ws.root)
    out = coord("push", "--all", cwd=ws.root).stdout.splitlines()
    assert sorted(out) == [f"{UP}: shared/{UP} is up to date", f"{OTHER}: shared/renamed is up to date"]
    everything = coord("push", "--all", "--to", "shared", cwd=ws.root).stdout
    assert f"{DER}: pushed 3 blocks to shared/{DER}" in everything


def test_a_failed_push_skips_what_reads_it_and_the_others_go_on(ws, tmp_path):
    pipeline(ws, (tmp_path / "repo").as_uri())
    coord("push", UP, "--to", "shared/taken", cwd=ws.root)
    # another dataset already sits under UP's name in the repository: UP's push diverges
    coord("push", OTHER, "--to", f"shared/{UP}", cwd=ws.root)
    done = coord("push", "-r", DER, OTHER, "--to", "shared", cwd=ws.root, check=False)
    assert done.returncode == 1
    assert f"{UP}: failed: " in done.stdout
    assert f"{DER}: skipped: it depends on {UP}, which failed" in done.stdout
    assert f"{OTHER}: pushed" in done.stdout
    assert done.stderr.startswith(f"coord: error: {UP}: shared/{UP} has blocks you don't")
    assert "(1 skipped: they depend on it)" in done.stderr


def test_several_datasets_need_a_repository_not_a_name(ws, tmp_path):
    pipeline(ws, (tmp_path / "repo").as_uri())
    bad = coord("push", UP, OTHER, "--to", "shared/one", cwd=ws.root, check=False)
    assert bad.returncode == 2 and "--to REPO/NAME names one dataset" in bad.stderr
    never = coord("push", "--all", cwd=ws.root, check=False)
    assert never.returncode == 2 and "no dataset has been pushed before" in never.stderr


def test_pull_r_brings_a_derivative_with_its_inputs(ws, other_ws, tmp_path):
    url = (tmp_path / "repo").as_uri()
    pipeline(ws, url)
    coord("push", "-r", DER, "--to", "shared", cwd=ws.root)
    out = coord("pull", "-r", f"shared/{DER}", cwd=with_repo(other_ws, url).root).stdout
    assert f"{DER}: new dataset: pulling 3 blocks" in out
    assert f"{UP}: new dataset: pulling 3 blocks" in out
    assert heads(other_ws, UP, DER) == heads(ws, UP, DER)
    assert not other_ws.dataset(OTHER).exists()
    coord("pull", "-r", f"shared/{DER}", cwd=other_ws.root)
    assert coord("pull", "--all", cwd=other_ws.root).stdout.splitlines() == [f"{UP}: up to date",
                                                                             f"{DER}: up to date"]


def test_pull_r_keeps_an_input_the_workspace_has_of_its_own(ws, other_ws, tmp_path):
    url = (tmp_path / "repo").as_uri()
    pipeline(ws, url)
    coord("push", "-r", DER, "--to", "shared", cwd=ws.root)
    make_root(with_repo(other_ws, url), UP, slices=1)
    mine = other_ws.dataset(UP).head()
    out = coord("pull", "-r", f"shared/{DER}", cwd=other_ws.root).stdout
    assert f"{UP}:" not in out and other_ws.dataset(UP).head() == mine


def test_a_missing_input_pulled_from_nowhere_fails_and_is_named(ws, other_ws, tmp_path):
    url = (tmp_path / "repo").as_uri()
    pipeline(ws, url)
    coord("push", DER, "--to", "shared", cwd=ws.root)  # without its input
    done = coord("pull", "-r", f"shared/{DER}", cwd=with_repo(other_ws, url).root, check=False)
    assert done.returncode == 1
    assert f"{DER}: new dataset" in done.stdout
    assert done.stderr.startswith(f"coord: error: {UP}: shared/{UP}: no dataset there")


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
