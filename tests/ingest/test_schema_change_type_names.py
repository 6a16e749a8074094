"""A refused schema change names the types as the ODF schema does (``Int64``, ``String``),
whether a pull refuses new data or ``coord add --replace`` refuses a new read schema, in a 0.39
and a 0.18 workspace alike (a 0.18 pull compares Arrow types, and names them the same)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ..support.cli import coord_here
from ..support.manifests import csv_root_manifest

REFUSAL = "the new {what} changes column 'id' from Int64 to String; a schema may only gain"


def workspace(home: Path, odf: str) -> Path:
    """A workspace of ``odf`` whose root ``cities`` (``id`` a BIGINT) has pulled one file."""
    coord_here("init", "--odf", odf, ".", cwd=home)
    (home / "cities.yaml").write_text(csv_root_manifest("cities", "in", ["id BIGINT", "ts TIMESTAMP",
                                                                         "city STRING"]))
    coord_here("add", "cities.yaml", cwd=home)
    (home / "in").mkdir()
    (home / "in" / "a.csv").write_text("id,ts,city\n1,2024-01-01T00:00:00Z,Oslo\n")
    coord_here("pull", "cities", cwd=home)
    return home


@pytest.mark.parametrize("odf", ["0.18", "0.39"])
def test_a_pull_of_data_that_retypes_a_column_names_odf_types(tmp_path, odf):
    home = workspace(tmp_path, odf)
    (home / "cities.yaml").write_text(csv_root_manifest("cities", "in", None))  # types inferred
    coord_here("add", "--replace", "cities.yaml", cwd=home)
    (home / "in" / "b.csv").write_text("id,ts,city\nx7,2024-01-02T00:00:00Z,Pune\n")
    refused = coord_here("pull", "cities", cwd=home, check=False)
    assert refused.returncode == 1
    assert REFUSAL.format(what="data in b.csv") in refused.stderr


def test_add_of_a_read_schema_that_retypes_a_column_names_the_same_types(tmp_path):
    home = workspace(tmp_path, "0.39")
    (home / "cities.yaml").write_text(csv_root_manifest("cities", "in", ["id STRING", "ts TIMESTAMP",
                                                                         "city STRING"]))
    refused = coord_here("add", "--replace", "cities.yaml", cwd=home, check=False)
    assert refused.returncode == 1
    assert REFUSAL.format(what="read schema") in refused.stderr
