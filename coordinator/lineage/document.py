"""The lineage page's data: one JSON document computed from the chains, rendered by
``page.render_lineage_page`` (and served as is by a server later).

The document has the seed's three levels of detail:
1. ``datasets`` and ``edges``: the dataset graph around the dataset asked about (as ``coord
   lineage`` walks it);
2. each dataset's ``fields``: the columns of its newest data slice (its Parquet schema), or,
   for a dataset without data, its read step's schema (roots) or the columns its recorded
   field lineage names (derivatives);
3. ``fieldEdges``: every field-lineage edge some field's lineage uses, once; each field lists
   the indices of its ``backward`` edges (towards the roots' columns) and ``forward`` edges (to
   every dependent column of the workspace), as ``FieldGraph`` walks them.

Where the page draws a graph, the document carries its layout (``layout.layered``): each
dataset's ``place`` ([layer, order]) in the dataset graph, and each field's ``places``
([dataset, field, layer, order], field None: every row) in that field's lineage graph.

Invariant: the document is plain JSON (strings, numbers, lists, objects) and names only what
the chains say; nothing in it is markup (the page inserts every string as text).
"""
from __future__ import annotations

from typing import Any

from ..metadata.objects import DatasetSourceRoot
from ..metadata.timestamps import format_timestamp, now_utc
from ..workspace import Dataset, Workspace
from ..workspace.config import OdfVersion
from .datasets import lineage
from .fields import FieldEdge, FieldGraph
from .layout import layered

VERSION = 1


def lineage_document(ws: Workspace, dataset_id: str, *, upstream: bool = True,
                     downstream: bool = False) -> dict[str, Any]:
    """The page's document for ``dataset_id`` and the datasets around it."""
    graph = lineage(ws, dataset_id, upstream=upstream, downstream=downstream)
    fields_graph = FieldGraph(ws)
    edges: dict[tuple, int] = {}

    def index(found: list[FieldEdge]) -> list[int]:
        return [edges.setdefault(_edge_key(e), len(edges)) for e in found]

    datasets = []
    for node in graph.nodes.values():
        entry: dict[str, Any] = {
            "id": node.id, "kind": node.kind, "records": node.records,
            "watermark": format_timestamp(node.watermark) if node.watermark else None,
            "origin": node.origin, "inputs": list(node.inputs), "fields": [], "fieldsFrom": None,
        }
        if node.kind != "missing":
            columns, entry["fieldsFrom"] = (
                _current_fields(node.id, fields_graph) if ws.odf_of(node.id) is OdfVersion.V039
                else _fields(ws.dataset(node.id), fields_graph))
            entry["fields"] = [
                {"name": name, "type": type_,
                 "backward": index(fields_graph.backward(node.id, name)),
                 "forward": index(fields_graph.forward(node.id, name))}
                for name, type_ in columns]
        datasets.append(entry)
    place = layered(graph.nodes, graph.edges)
    keys = list(edges)
    for entry in datasets:
        entry["place"] = list(place[entry["id"]])
        for f in entry["fields"]:
            used = [keys[i] for i in dict.fromkeys(f["backward"] + f["forward"])]
            f["places"] = _field_places(entry["id"], f["name"], used)
    return {
        "version": VERSION,
        "dataset": dataset_id,
        "generated": format_timestamp(now_utc()),
        "datasets": datasets,
        "edges": [list(e) for e in sorted(graph.edges)],
        "fieldEdges": [_edge_json(key) for key in edges],
    }


def _field_places(dataset_id: str, name: str, used: list[tuple]) -> list[list[Any]]:
    """The layout of one field's lineage graph: itself and both ends of each edge it uses."""
    ends = {(dataset_id, name)} | {(k[0], k[1]) for k in used} | {(k[2], k[3]) for k in used}

    def key(end: tuple) -> str:
        return f"{end[0]}\0{'' if end[1] is None else end[1]}\0{end[1] is None}"

    by_key = {key(e): e for e in ends}
    place = layered(by_key, [(key(k[:2]), key(k[2:4])) for k in used])
    return [[*by_key[k], *place[k]] for k in sorted(by_key)]


def _edge_key(e: FieldEdge) -> tuple:
    return (e.source.dataset, e.source.field, e.target.dataset, e.target.field, e.kind,
            e.expression, format_timestamp(e.version))


def _edge_json(key: tuple) -> dict[str, Any]:
    source_dataset, source_field, target_dataset, target_field, kind, expression, version = key
    return {"source": {"dataset": source_dataset, "field": source_field},
            "target": {"dataset": target_dataset, "field": target_field},  # field None: every row
            "kind": kind, "expression": expression, "version": version}


def _fields(ds: Dataset, fields_graph: FieldGraph) -> tuple[list[tuple[str, str | None]], str | None]:
    """(name, type) of each column, and where they were read from."""
    import pyarrow.parquet as pq

    source = None
    for h, block in ds.blocks():  # newest first
        if block.output_slice is not None:
            schema = pq.read_schema(ds.data_file(h))
            return [(f.name, str(f.type)) for f in schema], "data"
        source = source or block.source
    if isinstance(source, DatasetSourceRoot) and source.read.schema:
        return [_ddl_column(c) for c in source.read.schema], "readStep"
    versions = fields_graph.versions(ds.id)
    if versions:
        return [(o.field, None) for o in versions[-1].lineage.fields], "fieldLineage"
    return [], None


def _current_fields(dataset_id: str, fields_graph: FieldGraph) -> tuple[list[tuple[str, str | None]],
                                                                         str | None]:
    """A current-ODF dataset's (name, type) of each column and where they were read from: its
    newest data file, else the columns its recorded field lineage names."""
    schema = fields_graph.newest_schema(dataset_id)
    if schema is not None:
        return [(f.name, str(f.type)) for f in schema], "data"
    versions = fields_graph.versions(dataset_id)
    if versions:
        return [(o.field, None) for o in versions[-1].lineage.fields], "fieldLineage"
    return [], None


def _ddl_column(ddl: str) -> tuple[str, str | None]:
    """``name TYPE`` of a read step's schema (a name may be in backquotes)."""
    ddl = ddl.strip()
    end = ddl.find("`", 1) if ddl.startswith("`") else -1
    if end > 0:
        return ddl[1:end], ddl[end + 1:].strip() or None
    name, _, type_ = ddl.partition(" ")
    return name, type_.strip() or None
