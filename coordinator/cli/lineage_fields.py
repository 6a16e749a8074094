"""``coord lineage --field`` and ``coord lineage -o openlineage``: column-level lineage views.

Trees show one column's lineage with the operation (kind and expression) on each edge; a root
column is followed by where its dataset's data comes from. Columns that decide which rows
exist (filter, join, grouping) are shown under ``rows decided by``.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from rich.tree import Tree

from ..lineage.fields import (
    FieldEdge,
    FieldGraph,
    FieldRef,
    check_field,
    column_lineage_json,
    edge_json,
    root_origins,
    upstream_mapping,
)
from ..workspace import DatasetNotFound, Workspace
from .output import Output, markup_literal


def show_field_lineage(show: Output, ws: Workspace, dataset: str, field: str | None, direction: str,
                       depth: int | None, since: datetime | None, until: datetime | None) -> None:
    fields = FieldGraph(ws, since=since, until=until)
    if not fields.graph.exists(dataset):
        raise DatasetNotFound(dataset)
    if show.format == "openlineage":
        from ..lineage.openlineage import openlineage_events, to_json
        show.text(to_json(openlineage_events(fields, ws, dataset, since, until)))
        return
    if field is None:
        edges = upstream_mapping(fields, dataset, depth)
        if show.format == "json":
            show.json({"dataset": dataset, "edges": [edge_json(e) for e in edges]})
        else:
            show.rich(_mapping_tree(dataset, edges))
        return
    forward = direction in ("forward", "down")
    if show.format == "json":
        show.json(column_lineage_json(fields, dataset, field, forward, depth))
        return
    check_field(fields, dataset, field)
    walk = fields.forward if forward else fields.backward
    edges = walk(dataset, field, depth)
    start = FieldRef(dataset, field)
    if forward:
        show.rich(_tree(start, edges, lambda ref: [(e, e.target) for e in edges if e.source == ref],
                        "used by", lambda ref: ""))
    else:
        roots = root_origins(fields, start, edges)
        show.rich(_tree(start, edges, lambda ref: [(e, e.source) for e in edges if _into(e, ref)],
                        "computed from", lambda ref: f"  [dim]({markup_literal(str(roots[ref]))})[/dim]"
                        if ref in roots else ""))


def _into(edge: FieldEdge, ref: FieldRef) -> bool:
    return edge.target == ref or (edge.target.field is None and edge.target.dataset == ref.dataset)


def _operation(edge: FieldEdge) -> str:
    text = f"[cyan]{edge.kind}[/cyan]"
    if edge.expression:
        text += f" {markup_literal(edge.expression)}"
    return text


def _tree(start: FieldRef, edges: list[FieldEdge],
          next_of: Callable[[FieldRef], list[tuple[FieldEdge, FieldRef]]], relation: str,
          note: Callable[[FieldRef], str]) -> Tree:
    root = Tree(f"[bold]{markup_literal(str(start))}[/bold]{note(start)}"
                + ("" if next_of(start) else f": {relation} no other column"))
    shown = {start}

    def grow(branch: Tree, ref: FieldRef) -> None:
        pairs = next_of(ref)
        columns = [(e, r) for e, r in pairs if e.target.field is not None]
        conditions = [(e, r) for e, r in pairs if e.target.field is None]
        for edge, other in columns:
            add(branch, edge, other)
        if conditions:
            rows = branch.add("[dim]rows decided by[/dim]" if relation == "computed from"
                              else "[dim]decides the rows of[/dim]")
            for edge, other in conditions:
                add(rows, edge, other)

    def add(branch: Tree, edge: FieldEdge, other: FieldRef) -> None:
        label = f"{_operation(edge)} ← [bold]{markup_literal(str(other))}[/bold]{note(other)}" \
            if relation == "computed from" else \
            f"{_operation(edge)} → [bold]{markup_literal(str(other))}[/bold]"
        if other in shown:
            branch.add(label + " (see above)")
            return
        shown.add(other)
        grow(branch.add(label), other)

    grow(root, start)
    return root


def _mapping_tree(dataset: str, edges: list[FieldEdge]) -> Tree:
    root = Tree(f"[bold]{markup_literal(dataset)}[/bold]: fields and where they come from")
    by_dataset: dict[str, list[FieldEdge]] = {}
    for e in edges:
        by_dataset.setdefault(e.target.dataset, []).append(e)
    if not by_dataset:
        root.add("no field lineage recorded (pull the derivatives to record it)")
    for d, its in by_dataset.items():
        branch = root.add(f"[bold]{markup_literal(d)}[/bold]")
        by_field: dict[str | None, list[FieldEdge]] = {}
        for e in its:
            by_field.setdefault(e.target.field, []).append(e)
        for name, sources in by_field.items():
            title = markup_literal(name) if name is not None else "[dim]rows decided by[/dim]"
            column = branch.add(title)
            for e in sources:
                column.add(f"{_operation(e)} ← {markup_literal(str(e.source))}")
    return root
