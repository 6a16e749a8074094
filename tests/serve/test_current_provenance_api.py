"""``/api/datasets/DS/provenance`` on a current-ODF (0.39) derivative of a running ``coord
serve``: records named by ``offset``, blocks by multihash or digest; what it refuses is
answered 400 or 404 in one line before any engine is needed (the answers themselves are the
CLI's: tests/lineage/test_current_provenance.py)."""
from __future__ import annotations

import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.odf39_datasets import Written, write_derivative, write_root
from .conftest import serving


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("current-provenance-api")
    ws = Workspace.init(home, OdfVersion.V039)
    cfg = ws.meta / "config.yaml"
    cfg.write_text(cfg.read_text() + "serve: {poll: 1h, retryMax: 1s}\n")
    root = write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch")
    write_derivative(ws.meta / "datasets" / "large-cities", ws.meta / "locks", home / "d",
                     Written(root.root, root.id, root.blocks, root.data, ()))
    with serving(home) as s:
        yield s, ws


def test_an_offset_no_slice_holds_is_a_400(served):
    s, _ = served
    r = s.get("/api/datasets/large-cities/provenance", params={"offset": 99})
    assert r.status_code == 400
    assert r.json() == {"error": "--offset 99: no slice of large-cities holds them"}


def test_a_block_by_its_full_multihash_that_ran_no_transform_is_a_400(served):
    s, ws = served
    first = CurrentDataset(ws, "cities").state().slices[0]
    r = s.get("/api/datasets/cities/provenance", params={"block": str(first.block_hash), "offset": 0})
    assert r.status_code == 400
    assert "ran no transform" in r.json()["error"]


def test_offset_with_row_is_a_400(served):
    s, _ = served
    r = s.get("/api/datasets/large-cities/provenance", params={"offset": 0, "row": 0})
    assert (r.status_code, r.json()) == (400, {"error": "give offset alone, not with row or where"})
