"""coord lineage: the dataset graph from the chains, up (inputs) and down (readers)."""
from __future__ import annotations

import json
import shutil

import pytest

from coordinator.lineage.datasets import lineage
from coordinator.workspace import Workspace
from tests.support.cli import MANIFESTS, coord
from tests.support.manifests import derivative_manifest

ORDERS, DAILY, REPORT = "com.example.orders", "com.example.orders.daily", "com.example.report"

# reads the daily roll-up and the orders themselves: a diamond over com.example.orders
REPORT_MANIFEST = derivative_manifest(REPORT, [DAILY, ORDERS], f"SELECT * FROM `{DAILY}`")


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
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


def report_reads_only_daily_from(home, moment: str) -> None:
    """REPORT's query changed at ``moment`` to read DAILY alone (a SetTransform written by hand)."""
    from dataclasses import replace

    from coordinator.metadata.objects import MetadataBlock
    from coordinator.metadata.timestamps import parse_timestamp

    ds = Workspace.open(home).dataset(REPORT)
    source = replace(ds.state().source, inputs=[DAILY])
    with ds.writer() as w:
        w.commit(MetadataBlock(system_time=parse_timestamp(moment), source=source))


def inputs_over(home, *range_args: str) -> list[str]:
    graph = json.loads(coord("lineage", REPORT, "-o", "json", *range_args, cwd=home).stdout)
    return sorted(a for a, b in map(tuple, graph["edges"]) if b == REPORT)


def test_lineage_over_a_time_range_follows_every_query_version_in_force_then(home):
    report_reads_only_daily_from(home, "2031-01-01T00:00:00Z")
    assert inputs_over(home) == [DAILY]  # now
    assert inputs_over(home, "--until", "2030-12-31T00:00:00Z") == [ORDERS, DAILY]  # before the change
    assert inputs_over(home, "--since", "2031-06-01T00:00:00Z") == [DAILY]
    assert inputs_over(home, "--since", "2030-06-01T00:00:00Z", "--until", "2031-06-01T00:00:00Z") \
        == [ORDERS, DAILY]  # both versions were in force in the range


def test_downstream_lineage_over_a_range_leaves_out_readers_of_other_times(home):
    report_reads_only_daily_from(home, "2031-01-01T00:00:00Z")
    later = json.loads(coord("lineage", ORDERS, "--direction", "down", "-o", "json",
                             "--since", "2031-06-01T00:00:00Z", cwd=home).stdout)
    assert sorted(map(tuple, later["edges"])) == [(ORDERS, DAILY), (DAILY, REPORT)]
