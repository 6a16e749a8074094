"""Field lineage of current-ODF (0.39) derivatives pulled through the shared sandboxed Spark
engine: each step's lineage derived by the engine is kept beside the chain when it starts a
version (store/field_lineage.py), and ``coord lineage --field`` walks it across datasets to the
root's source. The expected edges are read off the queries by hand."""
from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.store.field_lineage import lineage_file, recorded_versions
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import append_rows, define_derivative, write_root

pytestmark = pytest.mark.spark

BIG = ("SELECT event_time, upper(city) AS city, population DIV 1000 AS thousands "
       "FROM cities WHERE population > 600000")
APPROX = "SELECT event_time, city, thousands * 1000 AS approx FROM big"


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    home = tmp_path_factory.mktemp("current-fields")
    ws = Workspace.init(home, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch")
    define_derivative(ws, "big", {"cities": CurrentDataset(ws, "cities").state().id}, BIG)
    coord("pull", "big", cwd=home)
    define_derivative(ws, "approx", {"big": CurrentDataset(ws, "big").state().id}, APPROX)
    coord("pull", "approx", cwd=home)
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", home / "scratch",
                [(datetime(2025, 3, 1, tzinfo=UTC), "Delhi", 32_941_000)])
    coord("pull", "big", cwd=home)
    coord("pull", "approx", cwd=home)
    return ws


def edges(answer: dict) -> set[tuple]:
    return {(e["source"]["dataset"], e["source"]["field"], e["target"]["dataset"], e["target"]["field"],
             e["kind"]) for e in answer["edges"]}


def test_a_column_is_walked_back_through_both_derivatives_to_the_root(ws):
    answer = json.loads(coord("lineage", "approx", "--field", "approx", "-o", "json", cwd=ws.root).stdout)
    assert edges(answer) == {
        ("big", "thousands", "approx", "approx", "transform"),
        ("cities", "population", "big", "thousands", "transform"),
        ("cities", "population", "big", None, "filter"),
    }
    origin = "fetched from https://example.org/cities.csv, read as Csv"  # the root's SetPollingSource
    assert answer["roots"] == {"cities.population": origin}


def test_a_second_step_with_the_same_query_starts_no_version(ws):
    for name in ("big", "approx"):
        ds = CurrentDataset(ws, name)
        state = ds.state()
        steps = [b for b in state.blocks if b.block.event.KIND == "ExecuteTransform"]
        assert len(steps) == 2
        assert [b.hash for b, _ in recorded_versions(ds, state)] == [steps[0].hash]


def test_openlineage_events_carry_the_column_lineage_of_each_derivative(ws):
    events = json.loads(coord("lineage", "approx", "-o", "openlineage", cwd=ws.root).stdout)
    assert sorted(e["job"]["name"] for e in events) == ["approx", "big"]
    [approx] = [e for e in events if e["job"]["name"] == "approx"]
    [output] = approx["outputs"]
    fields = output["facets"]["columnLineage"]["fields"]
    assert [(f["name"], f["field"]) for f in fields["approx"]["inputFields"]] == [("big", "thousands")]
    assert {f["name"] for f in output["facets"]["schema"]["fields"]} >= {"offset", "city", "approx"}


def test_verify_derives_the_kept_lineage_again_and_names_a_block_whose_lineage_differs(ws):
    assert "reproducibility: reproduced" in coord("verify", "approx", cwd=ws.root).stdout
    ds = CurrentDataset(ws, "approx")
    [(block, _)] = recorded_versions(ds, ds.state())
    path = lineage_file(ds, block.hash)
    kept = path.read_text()
    try:
        path.write_text(kept.replace('"transform"', '"copy"'))
        proc = coord("verify", "approx", cwd=ws.root, check=False)
    finally:
        path.write_text(kept)
    assert proc.returncode == 1
    assert (f"block {block.block.sequence_number} ({block.hash}): did not reproduce: the recorded "
            "field lineage of column 'approx' differs from the engine's") in proc.stdout


def test_the_lineage_page_shows_each_datasets_fields_and_their_lineage(ws):
    html = coord("lineage", "approx", "-o", "html", cwd=ws.root).stdout
    embedded = re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', html, re.S)
    assert embedded is not None
    by_id = {d["id"]: d for d in json.loads(embedded.group(1))["datasets"]}
    assert {f["name"] for f in by_id["approx"]["fields"]} >= {"event_time", "city", "approx"}
    assert by_id["approx"]["fieldsFrom"] == "data"
    approx = next(f for f in by_id["approx"]["fields"] if f["name"] == "approx")
    assert approx["backward"]  # walked back to big.thousands and cities.population
    assert {f["name"] for f in by_id["cities"]["fields"]} >= {"city", "population"}
