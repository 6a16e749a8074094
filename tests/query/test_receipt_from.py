"""``coord verify-receipt FILE --from REPO``: a receipt checked from a repository holding its
input blocks (a folder, or an S3 bucket on a real moto server), in a workspace that holds none
of them and is left so.

The receipts are ``test_receipt``'s (its cities workspace, pushed to the repository); a
repository whose block or data file was changed is refused, naming what was changed, since
the pull hashes every byte before it is parsed."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from tests.support.cli import coord_here
from tests.support.tamper import flip_a_byte

from ..repository.conftest import BUCKET, moto_endpoint, s3_env, s3_url  # noqa: F401 (fixtures)
from .test_receipt import BY_CITY, CITIES, SECOND, built, receipt_of, write_cities  # noqa: F401 (fixture)


@pytest.fixture
def origin(request, tmp_path) -> Path:
    """``test_receipt``'s cities workspace, copied for one test."""
    return Path(shutil.copytree(request.getfixturevalue("built"), tmp_path / "origin"))


def pushed(origin: Path, url: str) -> None:
    coord_here("repo", "add", "shared", url, cwd=origin)
    coord_here("push", CITIES, "--to", "shared", cwd=origin)


def stranger(tmp_path: Path) -> Path:
    """A workspace of its own: no dataset, no key trusted but its own."""
    other = tmp_path / "other"
    other.mkdir()
    coord_here("init", cwd=other)
    return other


def verified_from(where: Path, receipt: Path, repository: str):
    return coord_here("verify-receipt", str(receipt), "--from", repository, cwd=where, check=False)


def test_a_receipt_is_confirmed_from_a_folder_repository_and_nothing_is_pulled_here(origin, tmp_path):
    doc = receipt_of(origin, BY_CITY)
    repo = tmp_path / "repo"
    repo.mkdir()
    pushed(origin, repo.as_uri())
    other = stranger(tmp_path)

    checked = verified_from(other, origin / "receipt.json", str(repo))

    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.splitlines()[0] == (
        "confirmed: the query gives the receipt's answer at its blocks "
        f"({doc['answer']['rowCount']} rows, {doc['answer']['hash']})")
    assert "(pinned for org.example.cities)" in checked.stdout  # the datasets' signer, as a pull pins it
    assert Workspace.open(other).datasets() == []


def test_a_receipt_is_confirmed_from_an_s3_repository(origin, tmp_path, request):
    url = request.getfixturevalue("s3_url")
    receipt_of(origin, BY_CITY)
    pushed(origin, url)
    other = stranger(tmp_path)

    checked = verified_from(other, origin / "receipt.json", url)

    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("confirmed: ")


def test_a_repository_without_the_receipts_block_cannot_check_it_naming_the_block(origin, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    pushed(origin, repo.as_uri())  # then the cities move on: the repository's copy stops before
    write_cities(origin, [("Zadar", "HR", 70_000), *SECOND])
    coord_here("pull", CITIES, cwd=origin)
    doc = receipt_of(origin, BY_CITY)
    block = doc["inputs"][0]["block"]
    assert str(CurrentDataset(Workspace.open(origin), CITIES).state().head) == block

    checked = verified_from(stranger(tmp_path), origin / "receipt.json", str(repo))

    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == (
        f"cannot check: {repo} holds no block {block} of {CITIES} ({doc['inputs'][0]['id']}): its copy "
        f"of {CITIES} does not reach that block; check from where the receipt's author publishes it")


def test_a_repository_without_the_dataset_cannot_check_it_naming_the_block(origin, tmp_path):
    doc = receipt_of(origin, BY_CITY)
    empty = tmp_path / "empty"
    empty.mkdir()

    checked = verified_from(stranger(tmp_path), origin / "receipt.json", str(empty))

    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == (
        f"cannot check: {empty} holds no block {doc['inputs'][0]['block']} of {CITIES} "
        f"({doc['inputs'][0]['id']}): it has no dataset {CITIES}; check the repository, or pull the "
        "dataset from where the receipt's author publishes it")


def test_a_receipt_whose_block_was_changed_in_the_repository_is_refused_naming_it(origin, tmp_path):
    doc = receipt_of(origin, BY_CITY)
    repo = tmp_path / "repo"
    repo.mkdir()
    pushed(origin, repo.as_uri())
    block = doc["inputs"][0]["block"]
    stored = repo / CITIES / "blocks" / block
    flip_a_byte(stored, len(stored.read_bytes()) // 2)

    checked = verified_from(stranger(tmp_path), origin / "receipt.json", str(repo))

    assert checked.returncode == 1
    first = checked.stdout.splitlines()[0]
    assert first.startswith(f"cannot check: {repo}/{CITIES}: {CITIES}/blocks/{block}: block {block}: "
                            "its bytes hash to ")
    assert first.endswith("the stored block is damaged or not this block (nothing was pulled)")


def test_a_receipt_whose_data_file_was_changed_in_the_repository_is_refused_naming_it(origin, tmp_path):
    receipt_of(origin, BY_CITY)
    repo = tmp_path / "repo"
    repo.mkdir()
    pushed(origin, repo.as_uri())
    changed = sorted((repo / CITIES / "data").iterdir())[-1]
    flip_a_byte(changed)

    checked = verified_from(stranger(tmp_path), origin / "receipt.json", str(repo))

    assert checked.returncode == 1
    first = checked.stdout.splitlines()[0]
    assert first.startswith(f"cannot check: {repo}/{CITIES}: ")
    assert f"{CITIES}/data/{changed.name}: its bytes hash to " in first
    assert first.endswith("not to its name (the file was changed) (nothing was pulled)")


def test_a_malformed_receipt_is_judged_before_anything_is_fetched(tmp_path):
    (tmp_path / "not.json").write_text(json.dumps({"kind": "QueryReceipt", "version": 1}))

    checked = verified_from(stranger(tmp_path), tmp_path / "not.json", "s3://nowhere-at-all/none")

    assert checked.returncode == 1
    assert checked.stdout.startswith("cannot check: not a receipt this coord reads: the receipt: "
                                     "missing members")


def test_a_repository_is_also_named_as_this_workspace_knows_it(origin, tmp_path):
    receipt_of(origin, BY_CITY)
    repo = tmp_path / "repo"
    repo.mkdir()
    pushed(origin, repo.as_uri())
    other = stranger(tmp_path)
    coord_here("repo", "add", "theirs", repo.as_uri(), cwd=other)

    checked = verified_from(other, origin / "receipt.json", "theirs")

    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("confirmed: ")
