"""A current-ODF (0.39) root fed by a glob records in each AddData what the reference records
for one (kamu-cli 0.265, ``fetch_service/file.rs``): ``newSourceState`` of the ``default``
source, kind ``odf/etag``, its value the name of the last file taken. The reference goes on
from there with the files named after it, so whoever pulls the dataset and polls it takes only
new files; coord does the same when its workspace has lost its own record of the files taken.
"""
from __future__ import annotations

import json
import shutil

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import coord, coord_here
from .test_pull_odf39 import FIRST, NAME, SECOND, csv, manifest, records


def test_a_glob_taken_by_name_records_the_last_file_taken_as_the_reference_does(tmp_path):
    coord_here("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord_here("add", str(manifest(tmp_path)), cwd=tmp_path)
    csv(tmp_path, "2024-01-01.csv", FIRST[:1])
    csv(tmp_path, "2024-01-02.csv", FIRST[1:])
    coord("pull", NAME, cwd=tmp_path)
    csv(tmp_path, "2024-01-03.csv", SECOND)
    coord("pull", NAME, cwd=tmp_path)
    ds = CurrentDataset(Workspace.open(tmp_path), NAME)
    added = [b.block.event for b in ds.state().blocks if isinstance(b.block.event, e.AddData)]
    assert [a.new_source_state for a in added] == [
        e.SourceState(source_name="default", kind="odf/etag", value="2024-01-02.csv"),
        e.SourceState(source_name="default", kind="odf/etag", value="2024-01-03.csv"),
    ]
    assert verify_folder(ds.root) == []


def test_a_root_whose_workspace_lost_the_files_taken_goes_on_after_the_file_its_chain_names(tmp_path):
    coord_here("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord_here("add", str(manifest(tmp_path)), cwd=tmp_path)
    csv(tmp_path, "a.csv", FIRST)
    coord("pull", NAME, cwd=tmp_path)
    ds = CurrentDataset(Workspace.open(tmp_path), NAME)
    shutil.rmtree(ds.state_dir)  # the fetch states kept beside the chain
    csv(tmp_path, "b.csv", SECOND)
    assert "2 new records" in coord("pull", NAME, cwd=tmp_path).stdout
    assert [r["id"] for r in records(ds)] == [1, 2, 3, 4]  # a.csv not taken again


def status(home) -> dict:
    (entry,) = json.loads(coord("status", NAME, "-o", "json", cwd=home).stdout)
    return entry


def pulled_then_fetch_state_lost(home) -> None:
    """a.csv pulled into a new root, then the workspace's record of the files taken removed."""
    coord_here("init", "--odf", "0.39", ".", cwd=home)
    coord_here("add", str(manifest(home)), cwd=home)
    csv(home, "a.csv", FIRST)
    coord("pull", NAME, cwd=home)
    shutil.rmtree(CurrentDataset(Workspace.open(home), NAME).state_dir)


def test_status_of_a_root_whose_workspace_lost_the_files_taken_reads_them_from_its_chain(tmp_path):
    pulled_then_fetch_state_lost(tmp_path)
    entry = status(tmp_path)
    assert (entry["upToDate"], entry["reasons"], entry["newFiles"]) == (True, [], [])


def test_status_of_a_root_whose_workspace_lost_the_files_taken_names_only_newer_files(tmp_path):
    pulled_then_fetch_state_lost(tmp_path)
    csv(tmp_path, "b.csv", SECOND)
    entry = status(tmp_path)
    assert (entry["reasons"], entry["newFiles"]) == (["sourceChanged"], ["b.csv"])
