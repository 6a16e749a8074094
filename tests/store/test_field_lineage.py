"""The field lineage kept beside a current-ODF (0.39) derivative's chain (store/field_lineage.py)
and read by ``coord lineage --field`` (lineage/fields.py): one file per block that starts a
version, read back as versions in force from their block's system time. The lineage here is
written by hand (what the Spark engine derives at a pull: tests/lineage/test_current_fields.py)."""
from __future__ import annotations

import json

import pytest

from coordinator.lineage.fields import FieldGraph
from coordinator.metadata.objects import FieldLineage, FieldOrigin, FieldSource
from coordinator.store.dataset import CurrentDataset
from coordinator.store.field_lineage import lineage_file, record_version, recorded_versions
from coordinator.store.read import build
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import Written, write_derivative, write_root


def source(input: str, field: str, kind: str, expression: str | None = None) -> FieldSource:
    return FieldSource(input=input, field=field, kind=kind, expression=expression)


def copied(*names: str) -> list[FieldOrigin]:
    return [FieldOrigin(field=n, sources=[source("cities", n, "copy")]) for n in names]


LARGE = FieldLineage(fields=copied("event_time", "city", "population"),
                     conditions=[source("cities", "population", "filter", "(population > 1000000)")])
RENAMED = FieldLineage(fields=[FieldOrigin(field="town", sources=[source("cities", "city", "transform",
                                                                         "upper(city)")])])


@pytest.fixture
def ws(tmp_path) -> Workspace:
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    root = write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    write_derivative(ws.meta / "datasets" / "large-cities", ws.meta / "locks", tmp_path / "d",
                     Written(root.root, root.id, root.blocks, root.data, ()))
    return ws


def steps(ws: Workspace):
    """The derivative, and its two ExecuteTransform blocks with the chain before each."""
    ds = CurrentDataset(ws, "large-cities")
    state = ds.state()
    k1, k2 = (state.blocks.index(b) for b in state.blocks if b.block.event.KIND == "ExecuteTransform")
    return ds, [(state.blocks[k], build(list(state.blocks[:k]))) for k in (k1, k2)]


def test_the_same_lineage_at_the_next_step_starts_no_version(ws):
    ds, [(first, before1), (second, before2)] = steps(ws)
    record_version(ds, before1, first.hash, LARGE)
    record_version(ds, before2, second.hash, LARGE)
    assert [(b.hash, lineage) for b, lineage in recorded_versions(ds, ds.state())] == [(first.hash, LARGE)]
    assert not lineage_file(ds, second.hash).exists()


def test_a_changed_lineage_starts_a_version_in_force_from_its_block(ws):
    ds, [(first, before1), (second, before2)] = steps(ws)
    record_version(ds, before1, first.hash, LARGE)
    record_version(ds, before2, second.hash, RENAMED)
    every = FieldGraph(ws).every_version("large-cities")
    assert [(v.since, v.until, v.lineage) for v in every] == [
        (first.block.system_time, second.block.system_time, LARGE),
        (second.block.system_time, None, RENAMED)]
    assert [v.lineage for v in FieldGraph(ws).versions("large-cities")] == [RENAMED]  # the newest


def test_a_version_of_a_block_the_chain_no_longer_reaches_is_not_read(ws):
    ds, [(first, before1), (second, before2)] = steps(ws)
    record_version(ds, before2, second.hash, RENAMED)
    coord("reset", "large-cities", first.hash.digest.hex()[:16], cwd=ws.root)
    assert recorded_versions(ds, ds.state()) == []


def test_coord_lineage_walks_a_0_39_column_back_to_its_root_and_source(ws):
    ds, [(first, before1), _] = steps(ws)
    record_version(ds, before1, first.hash, LARGE)
    answer = json.loads(coord("lineage", "large-cities", "--field", "population", "-o", "json",
                              cwd=ws.root).stdout)
    edges = {(e["source"]["dataset"], e["source"]["field"], e["target"]["field"], e["kind"])
             for e in answer["edges"]}
    assert edges == {("cities", "population", "population", "copy"),
                     ("cities", "population", None, "filter")}
    origin = "fetched from https://example.org/cities.csv, read as Csv"  # the root's SetPollingSource
    assert answer["roots"] == {"cities.population": origin}


def test_an_unknown_column_names_the_known_ones(ws):
    ds, [(first, before1), _] = steps(ws)
    record_version(ds, before1, first.hash, LARGE)
    proc = coord("lineage", "large-cities", "--field", "nope", cwd=ws.root, check=False)
    assert proc.returncode == 1
    assert "known columns: city, event_time, offset, op, population, system_time" in proc.stderr
