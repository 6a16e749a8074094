"""Field-level lineage across the workspace, read from the metadata chains.

Each derivative block that carries ``fieldLineage`` starts a *version* of its dataset's field
lineage, in force from that block's system time until the next version (a changed query or
changed input schemas). Without a time range the newest version of each dataset is used;
with ``since``/``until`` every version in force at some moment of the range is, and each edge
names the version it comes from.

An edge runs from an input column to an output column: ``(input dataset, column) ->
(dataset, column)``. Columns that only decide which rows exist (a filter, a join condition, a
grouping key) reach every output row, so their edges end at the dataset with ``field=None``.
Walks expand each (dataset, column) once, so they terminate whatever the chains say.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound
from ..metadata.objects import DatasetSourceRoot, FieldLineage, FieldSource
from ..metadata.odf39.events import DatasetKind
from ..metadata.timestamps import format_timestamp
from ..store.dataset import CurrentDataset
from ..store.field_lineage import recorded_versions
from ..store.overview import CurrentDatasets, fetch_location, origin_of
from ..workspace import Workspace
from ..workspace.graph import DatasetGraph

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class FieldRef:
    dataset: str
    field: str | None  # None: every row of the dataset (a condition's target)

    def __str__(self) -> str:
        return f"{self.dataset}.{self.field}" if self.field is not None else f"{self.dataset}.*"


@dataclass(frozen=True)
class FieldVersion:
    """One dataset's field lineage as recorded by one block."""

    dataset: str
    block_hash: bytes
    since: datetime  # the recording block's system time
    until: datetime | None  # the next version's, or None while in force
    lineage: FieldLineage


@dataclass(frozen=True)
class FieldEdge:
    source: FieldRef
    target: FieldRef
    kind: str  # a FieldUse value
    expression: str | None
    version: datetime  # the ``since`` of the version the edge belongs to


def field_versions(ws: Workspace, dataset_id: str) -> list[FieldVersion]:
    """Every recorded field lineage of a 0.18 dataset, oldest first (one walk of its chain)."""
    recorded = [(h, b.system_time, b.field_lineage)
                for h, b in ws.dataset(dataset_id).blocks() if b.field_lineage is not None]
    recorded.reverse()
    return _versions(dataset_id, recorded)


def current_field_versions(current: CurrentDatasets, name: str) -> list[FieldVersion]:
    """Every field lineage kept for a current-ODF (0.39) derivative (``store.field_lineage``),
    oldest first; ``block_hash``: the binary multihash of the block starting each."""
    kept = recorded_versions(CurrentDataset(current.ws, name), current.state(name))
    return _versions(name, [(b.hash.to_bytes(), b.block.system_time, lineage) for b, lineage in kept])


def _versions(dataset_id: str, recorded: list[tuple[bytes, datetime, FieldLineage]]) -> list[FieldVersion]:
    """The recorded lineages (oldest first) as versions, each in force until the next."""
    ends: list[datetime | None] = [t for _, t, _ in recorded[1:]]
    ends += [None] if recorded else []
    return [FieldVersion(dataset_id, h, t, end, lineage)
            for (h, t, lineage), end in zip(recorded, ends, strict=True)]


def _in_force(versions: list[FieldVersion], since: datetime | None,
              until: datetime | None) -> list[FieldVersion]:
    if since is None and until is None:
        return versions[-1:]
    return [v for v in versions
            if (until is None or v.since <= until) and (since is None or v.until is None
                                                        or v.until > since)]


class FieldGraph:
    """Column-level lineage over a workspace's dataset graph, read lazily per dataset."""

    def __init__(self, ws: Workspace, *, since: datetime | None = None,
                 until: datetime | None = None, graph: DatasetGraph | None = None):
        self.workspace = ws
        self._since, self._until = since, until
        self.current = CurrentDatasets(ws)
        self.graph = graph or DatasetGraph(ws, current=self.current.inputs)
        self._versions: dict[str, list[FieldVersion]] = {}

    def versions(self, dataset_id: str) -> list[FieldVersion]:
        """The versions of ``dataset_id`` this graph uses (by its time range)."""
        if dataset_id not in self._versions:
            self._versions[dataset_id] = _in_force(self.every_version(dataset_id), self._since, self._until)
        return self._versions[dataset_id]

    def every_version(self, dataset_id: str) -> list[FieldVersion]:
        """Every version recorded for ``dataset_id`` (none for a root or a missing dataset)."""
        if not self.graph.exists(dataset_id):
            return []
        if self.current.holds(dataset_id):
            derivative = self.current.state(dataset_id).kind is DatasetKind.DERIVATIVE
            return current_field_versions(self.current, dataset_id) if derivative else []
        derivative = self.graph.state(dataset_id).kind == "derivative"
        return field_versions(self.workspace, dataset_id) if derivative else []

    def newest_schema(self, dataset_id: str) -> pa.Schema | None:
        """The Arrow schema of the dataset's newest data file (None before it has data); a 0.39
        file is checked against its block first, as every reader of slices checks it."""
        import pyarrow.parquet as pq

        if self.current.holds(dataset_id):
            from ..store.checked import checked_current_files

            newest = self.current.state(dataset_id).slices[-1:]
            files = checked_current_files(CurrentDataset(self.workspace, dataset_id), newest)
        else:
            files = self.workspace.dataset(dataset_id).data_files()[-1:]
        return pq.read_schema(files[-1]) if files else None

    def edges_into(self, dataset_id: str) -> list[FieldEdge]:
        """Every edge that ends in ``dataset_id``, conditions included."""
        edges = []
        for v in self.versions(dataset_id):
            for origin in v.lineage.fields:
                edges += _edges(origin.sources, FieldRef(dataset_id, origin.field), v.since)
            edges += _edges(v.lineage.conditions or [], FieldRef(dataset_id, None), v.since)
        return edges

    def backward(self, dataset_id: str, field: str, depth: int | None = None) -> list[FieldEdge]:
        """Edges reachable backwards from ``dataset.field`` towards the roots' columns."""
        def step(ref: FieldRef) -> Iterable[FieldEdge]:
            return [e for e in self.edges_into(ref.dataset)
                    if e.target.field == ref.field or e.target.field is None]
        return _walk(FieldRef(dataset_id, field), step, lambda e: e.source, depth)

    def forward(self, dataset_id: str, field: str, depth: int | None = None) -> list[FieldEdge]:
        """Edges reachable forwards from ``dataset.field`` to every dependent column."""
        def step(ref: FieldRef) -> Iterable[FieldEdge]:
            return [e for reader in self.graph.readers(ref.dataset)
                    for e in self.edges_into(reader) if e.source == ref]
        return _walk(FieldRef(dataset_id, field), step, lambda e: e.target, depth)


def _edges(sources: Iterable[FieldSource], target: FieldRef, version: datetime) -> list[FieldEdge]:
    return [FieldEdge(FieldRef(s.input, s.field), target, s.kind, s.expression, version)
            for s in sources]


def _walk(start: FieldRef, step, next_ref, depth: int | None) -> list[FieldEdge]:
    """Breadth first, ``depth`` hops at most; each column expanded once."""
    found: list[FieldEdge] = []
    seen = {start}
    frontier = [start]
    hops = 0
    while frontier and (depth is None or hops < depth):
        hops += 1
        following = []
        for ref in frontier:
            for edge in step(ref):
                found.append(edge)
                nxt = next_ref(edge)
                # a condition edge's target names no column: the walk does not go on from it
                if nxt.field is not None and nxt not in seen:
                    seen.add(nxt)
                    following.append(nxt)
        frontier = following
    return found



@dataclass(frozen=True)
class RootOrigin:
    """Where a root dataset's columns come from: its fetch step and read step."""

    fetch: str  # the URL or files glob
    read: str  # the read step's kind (csv, jsonLines, parquet, ...)

    def __str__(self) -> str:
        return f"fetched from {self.fetch}, read as {self.read}"


def root_origin(fields: FieldGraph, dataset_id: str) -> RootOrigin | None:
    """The source of a root dataset of ``fields`` (None for a derivative or a missing one)."""
    if not fields.graph.exists(dataset_id):
        return None
    source: object
    if fields.current.holds(dataset_id):  # its polling source, else its first push source
        state = fields.current.state(dataset_id)
        current = state.polling_source or next(iter(state.push_sources), None)
        if current is not None:
            return RootOrigin(origin_of(state) or "", current.read.KIND)
        source = fields.current.kept_feed(dataset_id)  # none in the chain: a File Feed's
    else:
        source = fields.graph.state(dataset_id).source
    if not isinstance(source, DatasetSourceRoot):
        return None
    return RootOrigin(fetch_location(source.fetch), source.read.KIND)


def upstream_mapping(fields: FieldGraph, dataset_id: str, depth: int | None = None) -> list[FieldEdge]:
    """The dataset-level mapping of fields: every edge into ``dataset_id`` and into each
    derivative upstream of it, ``depth`` datasets deep at most (the seed's high-level view)."""
    edges: list[FieldEdge] = []
    level, seen, hops = [dataset_id], {dataset_id}, 0
    while level and (depth is None or hops < depth):
        hops += 1
        following = []
        for current in level:
            edges += fields.edges_into(current)
            for i in (fields.graph.inputs(current) if fields.graph.exists(current) else ()):
                if i not in seen:
                    seen.add(i)
                    following.append(i)
        level = following
    return edges


class NoSuchField(NotFound):
    pass


def check_field(fields: FieldGraph, dataset: str, field: str) -> None:
    """A column of the dataset: in its data, its recorded lineage or its readers' lineage."""
    known = {o.field for v in fields.versions(dataset) for o in v.lineage.fields}
    known |= {e.source.field for r in fields.graph.readers(dataset) for e in fields.edges_into(r)
              if e.source.dataset == dataset and e.source.field}
    schema = fields.newest_schema(dataset)
    known |= set(schema.names if schema is not None else ())
    if field not in known:
        hint = f"known columns: {', '.join(sorted(known))}" if known else \
            "no field lineage is recorded for it yet: pull it (or its readers) first"
        raise NoSuchField(f"{dataset} has no column '{field}' in its field lineage ({hint})")


def root_origins(fields: FieldGraph, start: FieldRef, edges: list[FieldEdge]) -> dict[FieldRef, RootOrigin]:
    """Columns of root datasets reached backwards, with their dataset's source."""
    roots = {}
    for ref in {e.source for e in edges} | {start}:
        origin = root_origin(fields, ref.dataset)
        if origin is not None:
            roots[ref] = origin
    return roots


def edge_json(e: FieldEdge) -> dict:
    return {"source": {"dataset": e.source.dataset, "field": e.source.field},
            "target": {"dataset": e.target.dataset, "field": e.target.field},
            "kind": e.kind, "expression": e.expression, "version": format_timestamp(e.version)}


def column_lineage_json(fields: FieldGraph, dataset: str, field: str, forward: bool,
                        depth: int | None) -> dict:
    """One column's lineage as JSON (``coord lineage --field -o json`` and the HTTP API)."""
    check_field(fields, dataset, field)
    edges = (fields.forward if forward else fields.backward)(dataset, field, depth)
    roots = {} if forward else root_origins(fields, FieldRef(dataset, field), edges)
    return {"dataset": dataset, "field": field, "direction": "forward" if forward else "backward",
            "edges": [edge_json(e) for e in edges],
            "roots": {str(r): str(o) for r, o in roots.items()}}
