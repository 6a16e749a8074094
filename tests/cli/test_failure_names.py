"""A failure names its dataset once, also where the error already starts with that name (a
schema change a pull refuses, ``coord upgrade``'s refusals): in a pull's line and its
``coord: error:`` line, in a 0.18 and a 0.39 workspace, and in the list of several failures."""
from __future__ import annotations

import pytest

from coordinator.workspace import Workspace
from tests.ingest.conftest import add_dataset
from tests.store.test_upgrade import SOURCE
from tests.support.cli import coord_here
from tests.support.manifests import csv_root_manifest

REFUSAL = ("the new data in b.csv drops column 'city', String; a schema may only gain optional columns: "
           "keep the column and add a new one, or add the changed definition as a new dataset")

UNSAYABLE = SOURCE.replace("{kind: append}",
                           "{kind: snapshot, primaryKey: [city], observationColumn: seen}")


def test_each_failed_dataset_is_named_once_in_the_list(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    for name in ("one", "two"):
        add_dataset(ws, UNSAYABLE, name)
    failed = coord_here("upgrade", "one", "two", "--into", "../out", cwd=ws.root, check=False)
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        "coord: error: 2 of 2 datasets failed:",
        *(f"  {name}: source.merge.observationColumn: the snapshot option observationColumn has "
          "no counterpart in ODF 0.39 (0.39 marks changes in the op column); a 0.18 workspace "
          "(coord init --odf 0.18) keeps it" for name in ("one", "two"))]


@pytest.mark.parametrize("odf", ["0.18", "0.39"])
def test_a_refused_pull_names_its_dataset_once_in_each_line(tmp_path, odf):
    coord_here("init", "--odf", odf, ".", cwd=tmp_path)
    (tmp_path / "cities.yaml").write_text(csv_root_manifest("cities", "in", None))
    coord_here("add", "cities.yaml", cwd=tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,ts,city\n1,2024-01-01T00:00:00Z,Oslo\n")
    coord_here("pull", "cities", cwd=tmp_path)
    (tmp_path / "in" / "b.csv").write_text("id,ts\n2,2024-01-02T00:00:00Z\n")
    failed = coord_here("pull", "cities", cwd=tmp_path, check=False)
    assert failed.returncode == 1
    assert failed.stdout == f"cities: failed: {REFUSAL}\n"
    assert failed.stderr == f"coord: error: cities: {REFUSAL}\n"
