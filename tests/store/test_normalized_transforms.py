"""``coord add`` stores a transform as the spec says and the reference's pull requires: never
``query``, a single query as ``queries: [{query}]`` (the derivative's, and a root's
preprocess), from either manifest form; both forms at once are refused; a chain written before
with ``query`` is the same definition, so adding its manifest again writes nothing."""
from __future__ import annotations

from coordinator.metadata.objects import LateRows
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39.source import SqlQueryStep
from coordinator.store.dataset import CurrentDataset
from coordinator.store.late_rows import keep_late_rows_policy
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion
from tests.support.cli import coord, coord_here
from tests.support.manifests import derivative_manifest
from tests.support.odf39_datasets import define_legacy_derivative, write_root

QUERY = "SELECT event_time, city FROM cities WHERE population > 1000000"


def workspace(tmp_path) -> Workspace:
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    return ws


def stored_transform(ws: Workspace, name: str):
    state = CurrentDataset(ws, name).state()
    assert state.transform is not None
    return state.transform.transform


def test_a_single_query_is_stored_as_one_unaliased_step(tmp_path):
    ws = workspace(tmp_path)
    (tmp_path / "large.yaml").write_text(derivative_manifest("large", ["cities"], QUERY))
    coord_here("add", "large.yaml", cwd=tmp_path)
    stored = stored_transform(ws, "large")
    assert stored.query is None and stored.queries == [SqlQueryStep(alias=None, query=QUERY)]


def test_a_current_form_manifest_with_query_is_stored_normalized(tmp_path):
    ws = workspace(tmp_path)
    (tmp_path / "large.yaml").write_text(f"""\
kind: DatasetSnapshot
version: 1
content:
  name: large
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{{datasetRef: cities}}]
      transform: {{kind: Sql, engine: spark, query: "{QUERY}"}}
""")
    coord_here("add", "large.yaml", cwd=tmp_path)
    stored = stored_transform(ws, "large")
    assert stored.query is None and stored.queries == [SqlQueryStep(alias=None, query=QUERY)]


def test_a_roots_preprocess_query_is_stored_normalized(tmp_path):
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    (tmp_path / "prices.yaml").write_text("""\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: prices
  source:
    kind: root
    fetch: {kind: filesGlob, path: "data/*.csv"}
    read: {kind: csv, header: true}
    preprocess: {kind: sql, engine: spark, query: "SELECT * FROM input"}
    merge: {kind: append}
""")
    coord_here("add", "prices.yaml", cwd=tmp_path)
    source = CurrentDataset(ws, "prices").state().polling_source
    assert source is not None and source.preprocess is not None
    assert source.preprocess.query is None
    assert source.preprocess.queries == [SqlQueryStep(alias=None, query="SELECT * FROM input")]


def test_query_and_queries_together_are_refused_in_one_line(tmp_path):
    workspace(tmp_path)
    (tmp_path / "large.yaml").write_text(f"""\
kind: DatasetSnapshot
version: 1
content:
  name: large
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{{datasetRef: cities}}]
      transform:
        kind: Sql
        engine: spark
        query: "{QUERY}"
        queries: [{{query: "{QUERY}"}}]
""")
    proc = coord("add", "large.yaml", cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "give query or queries, not both" in proc.stderr
    assert not CurrentDataset(Workspace.open(tmp_path), "large").exists()


def test_a_chain_stored_with_query_is_unchanged_by_its_manifest_added_again(tmp_path):
    ws = workspace(tmp_path)
    cities = CurrentDataset(ws, "cities").state().id
    define_legacy_derivative(ws, "large", {"cities": cities}, QUERY)  # as coord add wrote it before
    keep_late_rows_policy(ws, "large", LateRows.CORRECT)  # kept as the manifest's (no other change)
    head = CurrentDataset(ws, "large").head()
    (tmp_path / "large.yaml").write_text(derivative_manifest("large", ["cities"], QUERY))
    out = coord_here("add", "--replace", "large.yaml", cwd=tmp_path).stdout
    assert out.startswith("unchanged")
    assert CurrentDataset(ws, "large").head() == head
    assert isinstance(CurrentDataset(ws, "large").state().blocks[-1].block.event, e.SetTransform)
