"""Two workspaces exchange a current-ODF (0.39) dataset over HTTP: one runs ``coord serve`` on
loopback (the Simple Transfer Protocol's routes, as the reference's node serves them), the
other pulls it by URL, then pulls the blocks added since; every byte is checked by the puller
and verify passes on both sides. The routes answer bad names with a 404 and keep the guard."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset, new_dataset_key
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..repository.conftest import make_root
from ..repository.test_current_odf import THIRD, add_batch, current_ws, files_of, records
from ..support.cli import coord
from ..support.odf39_datasets import write_root
from .conftest import Served, serving

QUIET = "serve: {poll: 1h, retryMax: 1s}\n"


def make_origin(folder: Path) -> Workspace:
    """A workspace holding ``cities`` (current ODF, 5 blocks signed by its key) and ``old``
    (ODF 0.18), its build service told to poll once an hour."""
    ws = current_ws(folder / "origin")
    ds = CurrentDataset(ws, "cities")
    write_root(ds.root, ds.lock_path.parent, folder / "scratch", key=new_dataset_key(), signer=ws.signing_key)
    make_root(ws, "old")
    config = ws.root / ".coord" / "config.yaml"
    config.write_text(config.read_text() + QUIET)
    return ws


@pytest.fixture
def origin(tmp_path) -> Workspace:
    return make_origin(tmp_path)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    """``make_origin``'s workspace served, for the tests that only read it."""
    with serving(make_origin(tmp_path_factory.mktemp("served")).root) as it:
        yield it


@pytest.fixture
def other(tmp_path) -> Workspace:
    return current_ws(tmp_path / "other")


def test_a_served_dataset_is_pulled_and_updated_over_http(origin, other, tmp_path):
    with serving(origin.root) as served:
        out = coord("pull", f"{served.url}/cities", cwd=other.root).stdout
        assert "cities: new dataset: pulling 5 blocks" in out
        assert f"5 blocks signed by {origin.public_key.hex()}" in out  # signatures travel too
    # committed while the service is stopped: its build service would hold the dataset
    new_head = add_batch(origin, THIRD, 40, tmp_path / "more")
    with serving(origin.root) as served:
        again = coord("pull", f"{served.url}/cities", cwd=other.root).stdout
        assert "cities: local is 1 block behind; pulling" in again
    mine, theirs = CurrentDataset(other, "cities"), CurrentDataset(origin, "cities")
    assert mine.head() == new_head
    assert verify_folder(mine.root) == [] and verify_folder(theirs.root) == []
    assert coord("verify", "cities", cwd=other.root).returncode == 0
    assert coord("verify", "cities", cwd=origin.root).returncode == 0
    assert records(other, "cities") == records(origin, "cities")
    assert files_of(mine.root) == files_of(theirs.root)


def test_the_routes_serve_the_dataset_folder_as_stored(served):
    ds = CurrentDataset(Workspace.open(served.home), "cities")
    head = ds.head()
    first = ds.state().slices[0].slice.physical_hash
    for path, rel in (("refs/head", layout.HEAD), (f"blocks/{head}", layout.block_file(head)),
                      (f"data/{first}", layout.data_file(first)),
                      (f"signatures/{head}", layout.signature_file(head))):
        assert served.get(f"/cities/{path}").content == (ds.root / rel).read_bytes()


@pytest.mark.parametrize(("path", "message"), [
    ("/cities/refs/main", "cities: no ref 'main' (only head)"),
    ("/cities/blocks/HEAD", "block 'HEAD': expected f1620"),
    (f"/cities/data/f1620{'0' * 64}", f"cities has no data file f1620{'0' * 64}"),
    ("/old/refs/head", "no current-ODF (0.39) dataset old"),
    ("/villages/refs/head", "no current-ODF (0.39) dataset villages"),
])
def test_what_is_not_there_is_a_404_naming_it(served, path, message):
    answer = served.get(path)
    assert answer.status_code == 404
    assert message in answer.json()["error"]


def test_with_a_token_the_routes_need_it(origin, other, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("a-token-of-twenty-chars")
    os.chmod(token_file, 0o600)
    with serving(origin.root, "--token-file", str(token_file)) as served:
        assert served.get("/cities/refs/head").status_code == 401
        given = httpx.get(f"{served.url}/cities/refs/head", timeout=30,
                          headers={"Authorization": "Bearer a-token-of-twenty-chars"})
        assert given.status_code == 200
        done = coord("pull", f"{served.url}/cities", cwd=other.root, check=False)
    assert done.returncode == 1
    assert "/cities/refs/head: HTTP 401 Unauthorized" in done.stdout
    assert not Path(CurrentDataset(other, "cities").root).exists()
