"""Dataset lineage: which datasets feed which, read from the metadata chains (DESIGN.md §13).

The graph is what the chains say now: a derivative's inputs are those of its newest
``SetTransform`` (``DatasetSourceDerivative.inputs``). Upstream follows inputs back to the
root datasets; downstream follows the workspace's datasets that read a dataset. An input the
workspace does not hold (a derivative pulled from a repository without its inputs) is a node
of kind ``missing``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from .catalog import inputs_of
from .metadata.objects import DatasetSourceDerivative, DatasetSourceRoot, FetchStepUrl
from .workspace import DatasetNotFound, Workspace


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


def lineage(ws: Workspace, dataset_id: str, *, upstream: bool = True,
            downstream: bool = False) -> Lineage:
    """The datasets ``dataset_id`` is computed from and/or those computed from it."""
    nodes: dict[str, Node] = {}

    def node(d: str) -> Node:
        if d not in nodes:
            nodes[d] = _node(ws, d)
        return nodes[d]

    if node(dataset_id).kind == "missing":
        raise DatasetNotFound(dataset_id)
    edges = set()
    if upstream:
        edges |= {(i, d) for i, d in _reachable(dataset_id, lambda d: node(d).inputs)}
    if downstream:
        readers: dict[str, list[str]] = {}
        for ds in ws.datasets():
            for input_id in node(ds.id).inputs:
                readers.setdefault(input_id, []).append(ds.id)
        edges |= {(d, r) for r, d in _reachable(dataset_id, lambda d: readers.get(d, []))}
    involved = {dataset_id, *(d for edge in edges for d in edge)}
    return Lineage(dataset_id, {d: node(d) for d in sorted(involved)}, edges)


def _reachable(start: str, next_of: Callable[[str], Iterable[str]]) -> Iterator[tuple[str, str]]:
    """(next, current) for every step away from ``start``; each dataset is expanded once."""
    pending, seen = [start], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for other in next_of(current):
            yield other, current
            pending.append(other)


def _node(ws: Workspace, dataset_id: str) -> Node:
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        return Node(dataset_id, "missing")
    s = ds.summary()
    origin = None
    if isinstance(s.source, DatasetSourceRoot):
        fetch = s.source.fetch
        origin = fetch.url if isinstance(fetch, FetchStepUrl) else fetch.path
    elif isinstance(s.source, DatasetSourceDerivative):
        origin = s.source.transform.engine
    return Node(dataset_id, s.kind, tuple(inputs_of(s.source)), s.num_records, s.watermark, origin)
