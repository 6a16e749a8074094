"""``coord lineage``: the dataset graph around one dataset, as a tree, Graphviz DOT or JSON;
column-level lineage in lineage_fields.py."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..metadata.timestamps import format_timestamp, parse_timestamp
from .context import complete_dataset, workspace
from .output import Output, markup_literal

if TYPE_CHECKING:
    from rich.tree import Tree

    from ..lineage.datasets import Lineage, Node


@click.command("lineage")
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--direction", type=click.Choice(["up", "down", "both", "backward", "forward"]),
              default="up", show_default=True,
              help="What DATASET is computed from (up/backward), what reads it (down/forward).")
@click.option("--output", "-o", type=click.Choice(["tree", "dot", "json", "html", "openlineage"]),
              default="tree", show_default=True,
              help="dot: a Graphviz graph (dot -Tsvg); json: nodes and edges; html: a page to click "
                   "through datasets, fields and field lineage; openlineage: OpenLineage RunEvents "
                   "with column lineage, one per query version.")
@click.option("--field", "field", default=None, metavar="COL",
              help="Column-level lineage of COL: backward to the root columns, forward to every "
                   "dependent column, with the operation on each edge.")
@click.option("--fields", "all_fields", is_flag=True,
              help="The dataset-level mapping of fields, through every upstream derivative.")
@click.option("--depth", type=click.IntRange(min=1), default=None, help="Hops to follow at most.")
@click.option("--since", default=None, metavar="T",
              help="The lineage of every query version in force from system time T (datasets "
                   "or, with --field/--fields, columns).")
@click.option("--until", default=None, metavar="T", help="... up to system time T.")
@click.pass_context
def lineage_(ctx: click.Context, dataset: str, direction: str, output: str, field: str | None,
             all_fields: bool, depth: int | None, since: str | None, until: str | None) -> None:
    """Show the datasets DATASET is computed from, or the ones computed from it; with
    --field/--fields/-o openlineage, the lineage of its columns (recorded on the chains: no
    engine needed)."""
    show = Output(output)
    begins = parse_timestamp(since) if since else None
    ends = parse_timestamp(until) if until else None
    if field is not None or all_fields or output == "openlineage":
        if direction == "both" or output in ("dot", "html"):
            raise click.UsageError("field lineage: use --direction backward or forward, -o tree, "
                                   "json or openlineage")
        from .lineage_fields import show_field_lineage

        show_field_lineage(show, workspace(ctx), dataset, field, direction, depth, begins, ends)
        return
    if direction in ("backward", "forward"):
        direction = "up" if direction == "backward" else "down"
    if output == "html":
        if since or until:
            raise click.UsageError("-o html draws the lineage in force now: --since/--until go with "
                                   "tree, dot or json")
        from ..lineage.document import lineage_document
        from ..lineage.page import render_lineage_page

        document = lineage_document(workspace(ctx), dataset, upstream=direction != "down",
                                    downstream=direction != "up")
        show.text(render_lineage_page(document), nl=False)
        return
    from ..lineage.datasets import lineage, within

    graph = lineage(workspace(ctx), dataset, upstream=direction != "down", downstream=direction != "up",
                    since=begins, until=ends)
    if depth is not None:
        graph = within(graph, depth)
    if output == "json":
        from ..lineage.datasets import as_json

        show.json(as_json(graph))
    elif output == "dot":
        show.text(_as_dot(graph))
    else:
        if direction != "down":
            show.rich(_tree(graph, dataset, graph.inputs, "computed from"))
        if direction != "up":
            show.rich(_tree(graph, dataset, graph.readers, "read by"))


def _label(node: Node) -> str:
    facts = [node.kind]
    if node.kind != "missing":
        facts += [node.origin or "", f"{node.records:,} records"]
        if node.watermark:
            facts.append(f"watermark {format_timestamp(node.watermark)}")
    else:
        facts.append("not in this workspace")
    return f"[bold]{markup_literal(node.id)}[/bold] ({markup_literal(', '.join(f for f in facts if f))})"


def _tree(graph: Lineage, dataset: str, next_of, relation: str) -> Tree:
    """One direction as a tree; a dataset met a second time is not expanded again."""
    from rich.tree import Tree

    root = Tree(f"{_label(graph.nodes[dataset])} {relation}:" if next_of(dataset) else
                f"{_label(graph.nodes[dataset])}: {relation} no other dataset")
    shown = {dataset}

    def grow(branch: Tree, current: str) -> None:
        for other in next_of(current):
            if other in shown:
                branch.add(f"{markup_literal(other)} (see above)")
                continue
            shown.add(other)
            grow(branch.add(_label(graph.nodes[other])), other)

    grow(root, dataset)
    return root


def _as_dot(graph: Lineage) -> str:
    shapes = {"root": "box", "derivative": "ellipse", "missing": "box, style=dashed"}
    lines = ["digraph lineage {", "  rankdir=LR;"]
    for node in graph.nodes.values():
        bold = ", penwidth=2" if node.id == graph.dataset else ""
        lines.append(f"  {json.dumps(node.id)} [shape={shapes[node.kind]}{bold}, "
                     f"label={json.dumps(node.id + chr(10) + node.kind)}];")
    for a, b in sorted(graph.edges):
        lines.append(f"  {json.dumps(a)} -> {json.dumps(b)};")
    lines.append("}")
    return "\n".join(lines)
