"""The dependency graph: dependency order, readers, and no cycle ever getting in."""
from __future__ import annotations

import pytest

from coordinator.workspace import DatasetNotFound, Workspace
from coordinator.workspace.graph import DatasetGraph, DependencyCycle
from tests.support.cli import MANIFESTS, coord
from tests.support.manifests import derivative_manifest

ORDERS, DAILY = "com.example.orders", "com.example.orders.daily"


def derivative(dataset_id: str, *inputs: str) -> str:
    return derivative_manifest(dataset_id, list(inputs), f"SELECT * FROM `{inputs[0]}`")


@pytest.fixture
def home(tmp_path):
    """orders (root) <- daily <- x <- y"""
    coord("init", "--odf", "0.18", cwd=tmp_path)
    (tmp_path / "x.yaml").write_text(derivative("x", DAILY))
    (tmp_path / "y.yaml").write_text(derivative("y", "x"))
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), str(MANIFESTS / f"{DAILY}.yaml"),
          str(tmp_path / "x.yaml"), str(tmp_path / "y.yaml"), cwd=tmp_path)
    return tmp_path


def test_a_redefinition_that_closes_a_loop_is_refused_at_add(home):
    head = (home / ".coord/datasets/x/meta/refs/head").read_bytes()
    (home / "x2.yaml").write_text(derivative("x", "y"))
    proc = coord("add", "--replace", str(home / "x2.yaml"), cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "coord: error: datasets depend on each other in a cycle: x -> y -> x; "
        "redefine one of them with `coord add --replace`"]
    assert (home / ".coord/datasets/x/meta/refs/head").read_bytes() == head


def test_order_puts_inputs_first_and_follows_them_only_when_recursive(home):
    graph = DatasetGraph(Workspace.open(home))
    assert graph.order(["y"], recursive=True) == [ORDERS, DAILY, "x", "y"]
    assert graph.order(["x", "y"], recursive=False) == ["x", "y"]


def test_order_does_not_follow_a_dataset_it_is_told_to_stop_at(home):
    graph = DatasetGraph(Workspace.open(home))
    assert graph.order(["y"], recursive=True, follow=lambda d: d != "x") == ["x", "y"]


def test_readers_and_downstream_edges(home):
    graph = DatasetGraph(Workspace.open(home))
    assert graph.readers(DAILY) == ["x"]
    assert sorted(graph.downstream(DAILY)) == [(DAILY, "x"), ("x", "y")]
    assert sorted(graph.upstream("x")) == [(ORDERS, DAILY), (DAILY, "x")]


def test_a_cycle_is_reported_by_ordering_never_followed(home):
    # as in a workspace written before add checked for cycles
    graph = DatasetGraph(Workspace.open(home), proposed={"x": ["y"]})
    with pytest.raises(DependencyCycle) as e:
        graph.order(["y"], recursive=True)
    assert set(e.value.loop) == {"x", "y"} and e.value.loop[0] == e.value.loop[-1]
    assert sorted(graph.upstream("y")) == [("x", "y"), ("y", "x")]  # the walk ends


def test_ordering_an_unknown_dataset_names_it(home):
    with pytest.raises(DatasetNotFound, match="nothing"):
        DatasetGraph(Workspace.open(home)).order(["nothing"], recursive=True)


def test_an_engine_reads_the_datasets_it_computes_and_their_inputs_held_here(home, tmp_path):
    from coordinator.engine.session import engine_reads
    from coordinator.metadata.manifest import load_manifest
    from coordinator.workspace.catalog import add_datasets

    ws = Workspace.open(home)
    assert engine_reads(ws, ["y"]) == ["x", "y"]
    assert engine_reads(ws, ["x", "y"]) == [DAILY, "x", "y"]
    assert engine_reads(ws, [ORDERS]) == []  # a root's files reach the engine as copies in its run folder
    assert engine_reads(ws, [ORDERS, DAILY]) == [ORDERS, DAILY]
    # a new definition being validated: its inputs too, none that the workspace does not hold
    assert engine_reads(ws, ["x"], proposed={"x": [ORDERS, "no.such"]}) == [ORDERS, DAILY, "x"]

    (tmp_path / "y2.yaml").write_text(derivative("y", DAILY))  # y now reads daily, no longer x
    add_datasets(ws, [load_manifest(tmp_path / "y2.yaml")], replace=True)
    assert engine_reads(ws, ["y"]) == [DAILY, "y"]
    assert engine_reads(ws, ["y"], every_query=True) == [DAILY, "x", "y"]  # a replay of its first block
