"""Dataset lineage: which datasets feed which, read from the metadata chains.

The graph is what the chains say now: a derivative's inputs are those of its newest
``SetTransform`` (``DatasetSourceDerivative.inputs``). Upstream follows inputs back to the
root datasets; downstream follows the workspace's datasets that read a dataset. An input the
workspace does not hold (a derivative pulled from a repository without its inputs) is a node
of kind ``missing``.

A current-ODF (0.39) derivative's inputs are its ``SetTransform`` inputs, resolved to the
workspace's datasets by ``did:odf`` (``store.overview.CurrentDatasets``), in the same
graph as the 0.18 datasets; a node's records, watermark and origin come from ``Overview``, the
read model both versions fill. Over a system-time range, a 0.39 dataset's inputs are those in
force now.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..metadata.timestamps import format_timestamp
from ..store.overview import CurrentDatasets, overview
from ..workspace import DatasetNotFound, Workspace
from ..workspace.graph import DatasetGraph


@dataclass(frozen=True)
class Node:
    id: str
    kind: str  # root, derivative, or missing (named as an input, not in this workspace)
    inputs: tuple[str, ...] = ()
    records: int = 0
    watermark: datetime | None = None
    origin: str | None = None  # roots: where the data is fetched from; derivatives: the engine


@dataclass
class Lineage:
    dataset: str  # the dataset asked about
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)  # (input, the dataset reading it)

    def inputs(self, dataset_id: str) -> list[str]:
        return sorted(a for a, b in self.edges if b == dataset_id)

    def readers(self, dataset_id: str) -> list[str]:
        return sorted(b for a, b in self.edges if a == dataset_id)


def lineage(ws: Workspace, dataset_id: str, *, upstream: bool = True, downstream: bool = False,
            since: datetime | None = None, until: datetime | None = None) -> Lineage:
    """The datasets ``dataset_id`` is computed from and/or those computed from it; with
    ``since``/``until``, through every query version in force over that system-time range
    (the nodes' records and watermarks are their current ones)."""
    current = CurrentDatasets(ws)
    graph = DatasetGraph(ws, since=since, until=until, current=current.inputs)
    if not graph.exists(dataset_id):
        raise DatasetNotFound(dataset_id)
    edges: set[tuple[str, str]] = set()
    if upstream:
        edges |= set(graph.upstream(dataset_id))
    if downstream:
        edges |= set(graph.downstream(dataset_id))
    involved = {dataset_id, *(d for edge in edges for d in edge)}
    return Lineage(dataset_id, {d: _node(ws, graph, current, d) for d in sorted(involved)}, edges)


def _node(ws: Workspace, graph: DatasetGraph, current: CurrentDatasets, dataset_id: str) -> Node:
    if not graph.exists(dataset_id):
        return Node(dataset_id, "missing")
    s = overview(ws, dataset_id, current, None if current.holds(dataset_id) else graph.state(dataset_id))
    return Node(dataset_id, s.kind, graph.inputs(dataset_id), s.num_records, s.watermark, s.origin)


def within(graph: Lineage, depth: int) -> Lineage:
    """The part of ``graph`` at most ``depth`` edges away from the dataset asked about (in the
    direction each edge was reached)."""
    distance = {graph.dataset: 0}
    frontier = [graph.dataset]
    for step in range(1, depth + 1):
        nxt = []
        for current in frontier:
            for other in (*graph.inputs(current), *graph.readers(current)):
                if other not in distance:
                    distance[other] = step
                    nxt.append(other)
        frontier = nxt
    edges = {(a, b) for a, b in graph.edges if a in distance and b in distance
             and abs(distance[a] - distance[b]) == 1}
    return Lineage(graph.dataset, {d: n for d, n in graph.nodes.items() if d in distance}, edges)


def as_json(graph: Lineage) -> dict:
    """Nodes and edges as plain JSON values (``coord lineage -o json``, the HTTP API)."""
    return {
        "dataset": graph.dataset,
        "nodes": [{"id": n.id, "kind": n.kind, "inputs": list(n.inputs), "records": n.records,
                   "watermark": format_timestamp(n.watermark) if n.watermark else None,
                   "origin": n.origin} for n in graph.nodes.values()],
        "edges": [list(e) for e in sorted(graph.edges)],
    }
