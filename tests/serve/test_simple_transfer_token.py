"""``coord pull http://host/DS`` (the simple protocol) sends ``$COORD_TOKEN`` as a bearer token,
as the smart protocol's client does: a ``coord serve --token-file`` gives the dataset to a
pull that has the token (without it the pull gets a 401, ``test_simple_transfer``)."""
from __future__ import annotations

import os
from pathlib import Path

from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..repository.test_current_odf import current_ws, records
from ..support.cli import coord
from .conftest import serving
from .test_simple_transfer import make_origin

TOKEN = "a-token-of-twenty-chars"


def token_file(folder: Path) -> str:
    path = folder / "token"
    path.write_text(TOKEN)
    os.chmod(path, 0o600)
    return str(path)


def test_a_pull_with_coord_token_set_reads_a_token_guarded_service(tmp_path):
    origin: Workspace = make_origin(tmp_path)
    other = current_ws(tmp_path / "other")
    with serving(origin.root, "--token-file", token_file(tmp_path)) as served:
        out = coord("pull", f"{served.url}/cities", cwd=other.root, env={"COORD_TOKEN": TOKEN}).stdout
    assert "cities: new dataset: pulling 5 blocks" in out
    mine, theirs = CurrentDataset(other, "cities"), CurrentDataset(origin, "cities")
    assert mine.head() == theirs.head() and verify_folder(mine.root) == []
    assert records(other, "cities") == records(origin, "cities")


def test_a_wrong_token_is_a_401_in_one_line(tmp_path):
    origin: Workspace = make_origin(tmp_path)
    other = current_ws(tmp_path / "other")
    with serving(origin.root, "--token-file", token_file(tmp_path)) as served:
        done = coord("pull", f"{served.url}/cities", cwd=other.root, check=False,
                     env={"COORD_TOKEN": "another-token-of-twenty"})
    assert done.returncode == 1
    assert "/cities/refs/head: HTTP 401 Unauthorized" in done.stdout
