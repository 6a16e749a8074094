"""``coord provenance``: the input records behind records of one block (record provenance)."""
from __future__ import annotations

from contextlib import ExitStack

import click

from .context import complete_dataset, workspace
from .output import Output


@click.command("provenance")
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--block", "block", metavar="HASH",
              help="A data block of DATASET (its hash or a prefix of it; of a 0.39 dataset, its "
                   "multihash or digest). A 0.39 dataset's records may be named by --offset alone.")
@click.option("--row", "rows", type=click.IntRange(min=0), multiple=True,
              help="A record of the block by its 0-based row (repeatable).")
@click.option("--offset", "offsets", type=click.IntRange(min=0), multiple=True,
              help="A record of a current-ODF (0.39) dataset by its offset (repeatable).")
@click.option("--where", default=None, metavar="SQL",
              help="The records of the block matching a SQL condition over its columns (DuckDB).")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def provenance_(ctx: click.Context, dataset: str, block: str | None, rows: tuple[int, ...],
                offsets: tuple[int, ...], where: str | None, output: str) -> None:
    """For records of a block of a derivative DATASET: the input records that made each one
    (dataset, block, row, values) and, per column, the input values it was computed from.
    Replays the block's query in the engine; exact for projections, filters, inner/outer joins,
    temporal joins (the version in force at the event's time) and (windowed) aggregations;
    other queries are refused by name."""
    from ..engine.session import EngineOnDemand
    from ..lineage.provenance import as_json, block_provenance, provenance_reads

    if sum(map(bool, (rows, offsets, where))) > 1:
        raise click.UsageError("give one of --row, --offset and --where")
    ws = workspace(ctx)
    with ExitStack() as stack:
        engine = EngineOnDemand(ws, stack, lambda: provenance_reads(ws, dataset))
        result = block_provenance(ws, dataset, block, engine.get, rows=list(rows) or None,
                                  offsets=list(offsets) or None, where=where)
    show = Output(output)
    if show.format == "json":
        show.json(as_json(result), highlight=True)
        return
    for record in result.records:
        named = f"offset {record.offset}" if record.offset is not None else f"row {record.row}"
        show.line(f"{named}: {_values(record.values)}")
        if not record.derivations:
            show.line("  not produced by a replay of its query over its inputs (e.g. input rows "
                      "the watermark dropped as late)")
        if len(record.derivations) > 1:
            show.line(f"  {len(record.derivations)} derivations: the replay makes identical records "
                      "from different input rows")
        for d in record.derivations:
            show.line(f"  made from {len(d.inputs)} input record(s):")
            for i in d.inputs:
                named = f"offset {i.offset}" if i.offset is not None else \
                    f"block {i.block.hex()[:12]} row {i.row}"
                show.line(f"    {i.dataset} {named}: {_values(i.values)}")
            for c in d.columns:
                shown = ", ".join(map(_text, c.values[:10])) + (", ..." if len(c.values) > 10 else "")
                show.line(f"    {c.column} <- {c.kind} {c.dataset}.{c.field} [{shown}]")


def _values(row: dict) -> str:
    return ", ".join(f"{k}={_text(v)}" for k, v in row.items())


def _text(value) -> str:
    from ..query.tail import json_value

    return "null" if value is None else str(json_value(value))
