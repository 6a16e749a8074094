"""The workspace's dependency graph: which dataset reads which, in one place for every service.

A derivative's inputs are those of its newest ``SetTransform`` (``DatasetSourceDerivative``);
a root has none. A graph over a system-time range (``since``/``until``) takes instead every
input of every source in force at some moment of the range: a source is in force from its
block's system time until the next source's. ``add``, ``pull``, ``verify``, ``delete`` and
``lineage`` ask this graph for dependency order, upstream and downstream instead of walking
the chains themselves.

Invariants:
- A dataset's inputs are read from its chain at most once per graph (lazily: ordering a few
  datasets does not read the whole workspace; ``readers`` and ``check_acyclic`` do).
- A cycle is never followed: ordering through one raises ``DependencyCycle`` naming the loop.
  ``add`` checks the whole workspace with the proposed definitions, so a cycle cannot get in;
  one made before that check existed is reported the same way by every command.
- An input the workspace does not hold is not a node: ``order`` raises ``DatasetNotFound``
  for it, ``upstream`` lists it (lineage shows it as missing).
- A current-ODF (0.39) dataset's inputs come from ``current`` (``store.define.current_inputs``:
  this layer cannot read those folders); a graph without it refuses one (``CurrentOdfDataset``)
  when it needs its inputs.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from graphlib import CycleError, TopologicalSorter

from ..errors import Invalid
from ..metadata.objects import DatasetSourceDerivative
from .config import OdfVersion
from .dataset import DatasetNotFound
from .state import DatasetState
from .workspace import Workspace


class DependencyCycle(Invalid):
    def __init__(self, loop: list[str]):
        self.loop = loop
        super().__init__(f"datasets depend on each other in a cycle: {' -> '.join(loop)}; "
                         "redefine one of them with `coord add --replace`")


def inputs_of(snapshot_or_source) -> list[str]:
    """The inputs a source (or a snapshot's source) declares: none for a root."""
    source = getattr(snapshot_or_source, "source", snapshot_or_source)
    return list(source.inputs) if isinstance(source, DatasetSourceDerivative) else []


def inputs_in_force(state: DatasetState, since: datetime | None, until: datetime | None) -> list[str]:
    """Every input of the sources of ``state`` in force at some moment of [since, until]."""
    sources = [(b.system_time, b.source) for _, b in reversed(state.blocks) if b.source is not None]
    ends: list[datetime | None] = [t for t, _ in sources[1:]] + [None]
    found: dict[str, None] = {}
    for (begins, source), end in zip(sources, ends, strict=True):
        if (until is None or begins <= until) and (since is None or end is None or end > since):
            found.update(dict.fromkeys(inputs_of(source)))
    return list(found)


class DatasetGraph:
    def __init__(self, ws: Workspace, proposed: Mapping[str, Iterable[str]] | None = None, *,
                 since: datetime | None = None, until: datetime | None = None,
                 current: Callable[[str], Iterable[str]] | None = None):
        """The graph of ``ws``; ``proposed`` overrides (or adds) datasets' inputs, as a change
        being checked before it is written; ``since``/``until``: over that range of system time;
        ``current``: the inputs of a 0.39 dataset, by name."""
        self._ws = ws
        self._current = current
        self._inputs: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in (proposed or {}).items()}
        self._states: dict[str, DatasetState] = {}
        self._range = (since, until) if since is not None or until is not None else None

    def exists(self, dataset_id: str) -> bool:
        return dataset_id in self._inputs or self._ws.dataset(dataset_id).exists()

    def state(self, dataset_id: str) -> DatasetState:
        """The dataset's read model as this graph read it (once): a command that holds the
        graph hands it down instead of walking the chain again."""
        if dataset_id not in self._states:
            ds = self._ws.dataset(dataset_id)
            if not ds.exists():
                raise DatasetNotFound(dataset_id)
            self._states[dataset_id] = ds.state()
        return self._states[dataset_id]

    def inputs(self, dataset_id: str) -> tuple[str, ...]:
        if dataset_id not in self._inputs and self._current is not None \
                and self._ws.odf_of(dataset_id) is OdfVersion.V039:
            self._inputs[dataset_id] = tuple(self._current(dataset_id))
        if dataset_id not in self._inputs:
            state = self.state(dataset_id)
            self._inputs[dataset_id] = tuple(inputs_of(state.source) if self._range is None
                                             else inputs_in_force(state, *self._range))
        return self._inputs[dataset_id]

    def ids(self) -> list[str]:
        return sorted({ds.id for ds in self._ws.datasets()} | self._inputs.keys())

    def readers(self, dataset_id: str) -> list[str]:
        """The datasets that read ``dataset_id`` directly."""
        return [d for d in self.ids() if dataset_id in self.inputs(d)]

    def upstream(self, dataset_id: str) -> list[tuple[str, str]]:
        """(input, reader) for every edge reachable backwards from ``dataset_id``; an input
        the workspace does not hold ends its path."""
        return self._reach(dataset_id, lambda d: self.inputs(d) if self.exists(d) else ())

    def downstream(self, dataset_id: str) -> list[tuple[str, str]]:
        """(dataset, reader) for every edge reachable forwards from ``dataset_id``."""
        readers: dict[str, list[str]] = {}
        for d in self.ids():
            for i in self.inputs(d):
                readers.setdefault(i, []).append(d)
        return [(d, r) for r, d in self._reach(dataset_id, lambda d: readers.get(d, []))]

    def order(self, ids: Iterable[str], *, recursive: bool,
              follow: Callable[[str], bool] = lambda dataset_id: True) -> list[str]:
        """``ids`` (with ``recursive``, and everything upstream of them) inputs first.

        ``follow`` says whether a dataset's inputs are part of the walk (pull does not follow
        the inputs of a dataset that is updated from a repository)."""
        wanted = list(ids)
        graph: dict[str, list[str]] = {}
        pending = list(wanted)
        while pending:
            dataset_id = pending.pop()
            if dataset_id in graph:
                continue
            deps = list(self.inputs(dataset_id)) if follow(dataset_id) else []
            graph[dataset_id] = deps if recursive else [d for d in deps if d in wanted]
            if recursive:
                pending.extend(deps)
        return self._sorted(graph)

    def check_acyclic(self) -> None:
        self._sorted({d: [i for i in self.inputs(d) if self.exists(i)] for d in self.ids()})

    @staticmethod
    def _sorted(graph: dict[str, list[str]]) -> list[str]:
        try:
            return list(TopologicalSorter(graph).static_order())
        except CycleError as e:
            raise DependencyCycle(list(e.args[1])) from None

    @staticmethod
    def _reach(start: str, next_of: Callable[[str], Iterable[str]]) -> list[tuple[str, str]]:
        """(next, current) for every step away from ``start``; each dataset is expanded once,
        so a cycle ends the walk instead of looping."""
        edges, pending, seen = [], [start], set()
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            for other in next_of(current):
                edges.append((other, current))
                pending.append(other)
        return edges
