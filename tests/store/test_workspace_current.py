"""A workspace holds current-ODF (0.39) datasets beside its 0.18 ones (``store/dataset.py``):
``coord init --odf`` picks the version new datasets get, a dataset folder in the reference's
layout is found as a 0.39 dataset, and a command that reads 0.18 chains only refuses it in one
line instead of calling it missing. The commands run in the test process (``coord_here``) but
for ``init``'s, which run as ``coord`` processes."""
from __future__ import annotations

import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.metadata.signing import SignatureStatus, check_signature
from coordinator.store.dataset import CurrentDataset, new_dataset_key
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace
from coordinator.workspace.config import ConfigError, OdfVersion
from coordinator.workspace.dataset import CurrentOdfDataset
from tests.support.cli import coord, coord_here
from tests.support.manifests import csv_root_manifest
from tests.support.odf39_datasets import at, define_derivative, write_root


def test_init_stores_new_datasets_in_0_18_unless_asked(tmp_path):
    coord("init", "--odf", "0.18", "old", cwd=tmp_path)
    assert "odf" not in (tmp_path / "old" / ".coord" / "config.yaml").read_text()  # its old form
    out = coord("init", "--odf", "0.39", "new", cwd=tmp_path).stdout
    assert "new datasets: ODF 0.39" in out
    assert Workspace.open(tmp_path / "old").config().odf is OdfVersion.V018
    assert Workspace.open(tmp_path / "new").config().odf is OdfVersion.V039
    assert coord_here("config", "get", "odf", cwd=tmp_path / "new").stdout.strip() == "0.39"


def test_a_config_naming_another_version_is_refused(tmp_path):
    ws = Workspace.init(tmp_path)
    with pytest.raises(ConfigError, match=r"config\.yaml: odf: expected 0\.18 or 0\.39 .*not '0\.34'"):
        ws.config().set("odf", "0.34")


def seeded(ws: Workspace, name: str):
    ds = CurrentDataset(ws, name)
    with ds.writer() as w:
        w.seed(new_dataset_key(), e.DatasetKind.ROOT, at(0), alias=name)
    return ds


def test_a_dataset_in_the_reference_layout_is_a_current_odf_dataset_of_the_workspace(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    ds = seeded(ws, "cities")
    assert ws.odf_of("cities") is OdfVersion.V039 and ws.odf_of("other") is None
    assert ds.exists() and ws.dataset("cities").exists()
    assert (ds.root / "refs" / "head").read_text().startswith("f1620")
    assert ds.alias() == "cities"
    assert str(ds.state().id).startswith("did:odf:")


def test_a_dataset_deleted_and_added_again_under_its_name_is_a_new_dataset_with_a_new_id(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    (tmp_path / "cities.yaml").write_text(csv_root_manifest("cities", "data"))
    coord_here("add", "cities.yaml", cwd=tmp_path)
    first = CurrentDataset(ws, "cities").state().id
    assert CurrentDataset(Workspace.open(tmp_path), "cities").state().id == first
    coord_here("delete", "cities", "--yes", cwd=tmp_path)
    coord_here("add", "cities.yaml", cwd=tmp_path)
    assert CurrentDataset(ws, "cities").state().id != first


def test_a_read_of_0_18_chains_refuses_a_current_odf_dataset_by_name(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    seeded(ws, "cities")
    with pytest.raises(CurrentOdfDataset, match="dataset cities is stored in current ODF \\(0.39\\), "
                       "which this command does not handle yet; it works on ODF 0.18 datasets"):
        ws.dataset("cities").state()


def test_each_block_the_workspace_makes_is_signed_by_its_key_over_the_binary_multihash(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    ds = seeded(ws, "cities")
    head = ds.head()
    signature = (ds.root / "signatures" / str(head)).read_bytes()
    status, signer = check_signature(head.to_bytes(), signature, {ws.public_key})
    assert status is SignatureStatus.TRUSTED and signer == ws.public_key
    assert check_signature(head.digest, signature, set())[0] is SignatureStatus.INVALID


def test_config_get_tells_the_version_of_a_workspace_whose_file_leaves_it_out(tmp_path):
    coord_here("init", "--odf", "0.18", cwd=tmp_path)
    assert coord_here("config", "get", "odf", cwd=tmp_path).stdout.strip() == "0.18"


def test_delete_removes_a_current_odf_dataset_and_refuses_one_a_derivative_reads(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    root = write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    define_derivative(ws, "large", {"cities": root.id}, "SELECT * FROM cities")
    refused = coord_here("delete", "--yes", "cities", cwd=tmp_path, check=False)
    assert refused.stderr.strip().endswith("dataset cities is an input of large; delete those first")
    coord_here("delete", "--yes", "large", cwd=tmp_path)
    coord_here("delete", "--yes", "cities", cwd=tmp_path)
    assert ws.odf_of("cities") is None and ws.odf_of("large") is None
    assert not (ws.meta / "datasets" / "cities").exists()


def test_reset_moves_a_current_odf_head_back_and_the_later_objects_go(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    root = write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    first_data = root.blocks[-2]  # the first AddData
    out = coord_here("reset", "cities", first_data.digest.hex()[:10], cwd=tmp_path).stdout
    assert out.strip() == f"cities head is now {first_data}"
    ds = CurrentDataset(ws, "cities")
    assert ds.head() == first_data and len(ds.state().slices) == 1
    assert not (ds.root / "data" / str(root.data[1])).exists()  # named only by the later block
    assert not (ds.root / "blocks" / str(root.blocks[-1])).exists()
    assert verify_folder(ds.root) == []
    refused = coord_here("reset", "cities", "f16", cwd=tmp_path, check=False)
    assert refused.stderr.strip().endswith("f16 matches 4 blocks of cities; give more digits")
