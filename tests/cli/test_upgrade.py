"""``coord upgrade DS... --into DIR`` through the real CLI: a 0.18 root written as a current-ODF
folder, worded per dataset (``-o json`` too), refusals in one line with exit 1. The commands
run in the test process (``coord_here``) but for the refused one, which runs as a ``coord``
process."""
from __future__ import annotations

import json
import shutil

import pytest

from coordinator.metadata.manifest import load_manifest
from coordinator.store.read import read_state
from coordinator.store.verify import verify_folder
from coordinator.transform.execute import pull_derivative
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets
from coordinator.workspace.config import OdfVersion
from tests.ingest.conftest import add_dataset
from tests.store.test_upgrade import SOURCE, pulled_root
from tests.support.cli import coord, coord_here
from tests.support.fake_engine import FakeEngine
from tests.support.manifests import derivative_manifest
from tests.support.odf39_datasets import write_root


@pytest.fixture(scope="module")
def pulled(tmp_path_factory):
    """A 0.18 workspace with its root ``cities`` pulled."""
    ws = Workspace.init(tmp_path_factory.mktemp("pulled") / "ws")
    pulled_root(ws)
    return ws.root


@pytest.fixture
def home(pulled, tmp_path):
    """A copy of ``pulled`` for one test."""
    return shutil.copytree(pulled, tmp_path / "ws")


def test_upgrade_prints_the_new_id_blocks_records_and_that_hashes_change(home):
    out = coord_here("upgrade", "cities", "--into", "../out", cwd=home).stdout
    state = read_state(home.parent / "out" / "cities")
    assert out == (f"cities: {state.id} in ../out/cities: 7 blocks, 6 records; the hashes are "
                   "new (coord/odf-0.18-origin.json maps the 0.18 blocks to them)\n")
    assert verify_folder(home.parent / "out" / "cities") == []


def test_upgrade_json_gives_the_head_and_the_block_mapping(home):
    [done] = json.loads(coord_here("upgrade", "cities", "--into", "../out", "-o", "json", cwd=home).stdout)
    state = read_state(home.parent / "out" / "cities")
    assert (done["id"], done["head"], done["blocks"], done["records"]) == (
        str(state.id), str(state.head), 7, 6)
    assert [m["odf039"] for m in done["origin"]] == [str(s.block_hash) for s in state.slices]


def test_an_existing_target_is_refused_in_one_line(home):
    coord_here("upgrade", "cities", "--into", "../out", cwd=home)
    proc = coord("upgrade", "cities", "--into", "../out", cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr == ("coord: error: ../out/cities exists; upgrade into another folder, "
                           "or remove it first\n")


def test_several_datasets_keep_going_past_one_that_fails(home):
    ws = Workspace.open(home)
    add_dataset(ws, SOURCE.replace("{kind: append}",
                                   "{kind: snapshot, primaryKey: [city], observationColumn: seen}"),
                "snap")
    proc = coord_here("upgrade", "snap", "cities", "--into", "../out", cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stdout.startswith("cities: did:odf:")
    assert proc.stderr.startswith("coord: error: snap: source.merge.observationColumn: ")
    assert (home.parent / "out" / "cities").is_dir() and not (home.parent / "out" / "snap").exists()


def test_r_upgrades_the_missing_inputs_first(home, tmp_path):
    ws = Workspace.open(home)
    (home / "large.yaml").write_text(derivative_manifest(
        "large", ["cities"], "SELECT * FROM cities WHERE population > 1000000"))
    add_datasets(ws, [load_manifest(home / "large.yaml")])
    pull_derivative(ws, "large", lambda: FakeEngine(tmp_path / "engine-run"))
    refused = coord_here("upgrade", "large", "--into", "../out", cwd=home, check=False)
    assert refused.returncode == 1 and "large reads cities, which is not upgraded" in refused.stderr
    out = coord_here("upgrade", "-r", "large", "--into", "../out", cwd=home).stdout.splitlines()
    assert [line.split(":")[0] for line in out] == ["cities", "large"]
    large = read_state(home.parent / "out" / "large")
    assert large.transform.inputs[0].dataset_ref == str(read_state(home.parent / "out" / "cities").id)


def test_a_current_odf_dataset_is_refused_as_already_upgraded(tmp_path):
    ws = Workspace.init(tmp_path / "ws", OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    proc = coord_here("upgrade", "cities", "--into", "../out", cwd=ws.root, check=False)
    assert proc.returncode == 1
    assert proc.stderr == ("coord: error: cities is already current ODF (0.39), in the reference's "
                           "layout: nothing to upgrade (coord push copies it to a folder or S3 "
                           "repository)\n")
    assert not (tmp_path / "out").exists()
