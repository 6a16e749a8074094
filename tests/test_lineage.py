"""coord lineage: the dataset graph from the chains, up (inputs) and down (readers)."""
from __future__ import annotations

import json
import shutil

import pytest

from coordinator.lineage import lineage
from coordinator.workspace import Workspace

from .conftest import MANIFESTS, coord, derivative_manifest

ORDERS, DAILY, REPORT = "com.example.orders", "com.example.orders.daily", "com.example.report"

# reads the daily roll-up and the orders themselves: a diamond over com.example.orders
REPORT_MANIFEST = derivative_manifest(REPORT, [DAILY, ORDERS], f"SELECT * FROM `{DAILY}`")


@pytest.fixture
def home(tmp_path):
    coord("init", cwd=tmp_path)
    (tmp_path / "report.yaml").write_text(REPORT_MANIFEST)
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), str(MANIFESTS / f"{DAILY}.yaml"),
          str(tmp_path / "report.yaml"), cwd=tmp_path)
    return tmp_path


def test_upstream_tree_shows_each_input_once(home):
    text = coord("lineage", REPORT, cwd=home).stdout
    assert text.splitlines()[0].startswith(f"{REPORT} (derivative, spark, 0 records) computed from:")
    assert text.count(f"{ORDERS} (root") == 1 and f"{ORDERS} (see above)" in text


def test_downstream_follows_readers_of_readers(home):
    graph = json.loads(coord("lineage", ORDERS, "--direction", "down", "-o", "json", cwd=home).stdout)
    assert sorted(n["id"] for n in graph["nodes"]) == [ORDERS, DAILY, REPORT]
    assert sorted(map(tuple, graph["edges"])) == [(ORDERS, DAILY), (ORDERS, REPORT), (DAILY, REPORT)]


def test_a_root_dataset_has_no_inputs(home):
    text = coord("lineage", ORDERS, cwd=home).stdout
    assert "computed from no other dataset" in text


def test_dot_output_draws_the_paths_through_the_dataset_both_ways(home):
    dot = coord("lineage", DAILY, "--direction", "both", "-o", "dot", cwd=home).stdout
    assert dot.startswith("digraph lineage {")
    assert f'"{ORDERS}" -> "{DAILY}";' in dot and f'"{DAILY}" -> "{REPORT}";' in dot
    assert f'"{ORDERS}" -> "{REPORT}";' not in dot  # not a path through {DAILY}


def test_an_input_missing_from_the_workspace_is_a_node_of_kind_missing(home):
    # as after pulling a derivative from a repository without its inputs
    shutil.rmtree(home / ".coord" / "datasets" / ORDERS)
    graph = lineage(Workspace.open(home), DAILY)
    assert graph.nodes[ORDERS].kind == "missing" and graph.inputs(DAILY) == [ORDERS]


def test_an_unknown_dataset_is_an_error(home):
    proc = coord("lineage", "com.example.nothing", cwd=home, check=False)
    assert proc.returncode == 1 and "does not exist" in proc.stderr
