"""``coord lineage``: the dataset graph around one dataset, as a tree, Graphviz DOT or JSON."""
from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.tree import Tree

from ..lineage import Lineage, Node, lineage
from ..lineage import as_json as _as_json
from ..metadata.timefmt import format_timestamp
from .console import out
from .console import workspace as _ws


@click.command("lineage")
@click.argument("dataset")
@click.option("--direction", type=click.Choice(["up", "down", "both"]), default="up",
              show_default=True, help="What DATASET is computed from (up), what reads it (down).")
@click.option("--output", "-o", type=click.Choice(["tree", "dot", "json"]), default="tree",
              show_default=True, help="dot: a Graphviz graph (dot -Tsvg); json: nodes and edges.")
@click.pass_context
def lineage_(ctx: click.Context, dataset: str, direction: str, output: str) -> None:
    """Show the datasets DATASET is computed from, or the ones computed from it."""
    graph = lineage(_ws(ctx), dataset, upstream=direction != "down",
                    downstream=direction != "up")
    if output == "json":
        click.echo(json.dumps(_as_json(graph), indent=2))
    elif output == "dot":
        click.echo(_as_dot(graph))
    else:
        if direction != "down":
            out.print(_tree(graph, dataset, graph.inputs, "computed from"))
        if direction != "up":
            out.print(_tree(graph, dataset, graph.readers, "read by"))


def _label(node: Node) -> str:
    facts = [node.kind]
    if node.kind != "missing":
        facts += [node.origin or "", f"{node.records:,} records"]
        if node.watermark:
            facts.append(f"watermark {format_timestamp(node.watermark)}")
    else:
        facts.append("not in this workspace")
    return f"[bold]{escape(node.id)}[/bold] ({escape(', '.join(f for f in facts if f))})"


def _tree(graph: Lineage, dataset: str, next_of, relation: str) -> Tree:
    """One direction as a tree; a dataset met a second time is not expanded again."""
    root = Tree(f"{_label(graph.nodes[dataset])} {relation}:" if next_of(dataset) else
                f"{_label(graph.nodes[dataset])}: {relation} no other dataset")
    shown = {dataset}

    def grow(branch: Tree, current: str) -> None:
        for other in next_of(current):
            if other in shown:
                branch.add(f"{escape(other)} (see above)")
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
