"""`coord provenance` refuses what it cannot answer before any engine runs, and says why
(the DuckDB test engine stands in for Spark; it derives no provenance itself)."""
from __future__ import annotations

import pytest

from coordinator.workspace import Workspace
from tests.support.cli import coord
from tests.support.tamper import flip_a_byte
from tests.transform.pipeline import LARGE, ORDERS, order_rows, write_manifests, write_orders_file


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("provenance-arguments")
    coord("init", "--odf", "0.18", cwd=home)
    coord("add", str(write_manifests(home)), cwd=home)
    write_orders_file(home, "1.csv", order_rows(2))
    coord("pull", "-r", LARGE, cwd=home, fake_engine=True)
    return home


def newest_block(home, dataset_id: str) -> str:
    return Workspace.open(home).dataset(dataset_id).head().hex()


def provenance_error(home, *args: str) -> str:
    proc = coord("provenance", *args, cwd=home, check=False, fake_engine=True)
    assert proc.returncode != 0
    return proc.stderr.strip().splitlines()[-1]


def test_a_row_outside_the_block_is_refused_with_the_rows_it_has(home):
    block = newest_block(home, LARGE)
    assert "--row 999: block" in provenance_error(home, LARGE, "--block", block, "--row", "999")


def test_a_where_that_matches_nothing_is_refused(home):
    block = newest_block(home, LARGE)
    error = provenance_error(home, LARGE, "--block", block, "--where", "amount < 0")
    assert "no record of block" in error


def test_a_where_that_is_not_one_condition_is_refused(home):
    block = newest_block(home, LARGE)
    error = provenance_error(home, LARGE, "--block", block, "--where", "true; SELECT 1")
    assert "--where" in error


def test_a_root_block_has_no_provenance(home):
    block = newest_block(home, ORDERS)
    assert "ran no transform" in provenance_error(home, ORDERS, "--block", block)


def test_an_engine_that_cannot_trace_the_query_is_reported(home):
    block = newest_block(home, LARGE)
    assert "not supported for this query" in provenance_error(home, LARGE, "--block", block, "--row", "0")


@pytest.mark.parametrize("changed", [LARGE, ORDERS], ids=["the block's slice", "an input's slice"])
def test_a_changed_slice_is_refused_before_the_engine_runs(tmp_path, changed):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    coord("add", str(write_manifests(tmp_path)), cwd=tmp_path)
    write_orders_file(tmp_path, "1.csv", order_rows(2))
    coord("pull", "-r", LARGE, cwd=tmp_path, fake_engine=True)
    path = Workspace.open(tmp_path).dataset(changed).data_files()[-1]
    flip_a_byte(path)
    error = provenance_error(tmp_path, LARGE, "--block", newest_block(tmp_path, LARGE), "--row", "0")
    assert error.startswith(f"coord: error: dataset {changed}: refusing to read {path}: ")
