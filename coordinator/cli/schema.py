"""``coord schema``: a dataset's schema in force and, with ``--history``, every version of it
(``query/schema.py`` reads them; this module words them)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .context import complete_dataset, workspace
from .output import Output

if TYPE_CHECKING:
    from ..query.schema import DatasetSchema, SchemaVersion


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--history", is_flag=True,
              help="Every version of the schema: its block, system time and the columns it added.")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: the columns in force (and the versions) as a document.")
@click.pass_context
def schema(ctx: click.Context, dataset: str, history: bool, output: str) -> None:
    """Show the schema of DATASET: column, type, nullability (ODF 0.39: its newest SetDataSchema)."""
    from ..query.schema import dataset_schema, schema_json

    answer = dataset_schema(workspace(ctx).dataset(dataset))
    show = Output(output)
    if output == "json":
        show.json(schema_json(answer, history))
        return
    if answer.in_force is None:
        show.line(_no_schema(answer))
        return
    if history:
        show.table(("block", "system time", "hash", "change"),
                   (_version_row(v, k == 0) for k, v in enumerate(answer.versions)))
        show.line()
    show.line(f"{answer.dataset}: the schema in force since {_since(answer.in_force)}")
    show.table(("column", "type", "nullable"),
               ((c.name, c.text, "-" if c.required is None else "no" if c.required else "yes")
                for c in answer.in_force.columns))


def _no_schema(answer: DatasetSchema) -> str:
    declared = f"; its read schema declares {', '.join(answer.declared)}" if answer.declared else ""
    return f"{answer.dataset} has no schema yet: it has no data (its first pull records one){declared}"


def _since(v: SchemaVersion) -> str:
    from ..metadata.timestamps import format_timestamp

    return f"block {v.sequence_number} ({format_timestamp(v.system_time)})"


def _version_row(v: SchemaVersion, first: bool) -> tuple[str, ...]:
    from ..metadata.timestamps import format_timestamp

    change = f"first: {len(v.columns)} columns" if first else f"added {', '.join(v.added)}" \
        if v.added else "columns changed"
    return str(v.sequence_number), format_timestamp(v.system_time), v.block, change
