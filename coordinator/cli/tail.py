"""``coord tail``: the last records of a dataset (or rows of its state), now or as at a system
time or block."""
from __future__ import annotations

import click

from .context import complete_dataset, workspace
from .output import Output


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("-n", "num", default=10, show_default=True, help="Number of records.")
@click.option("--output", "-o", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="json: a list of records; csv: with a header line.")
@click.option("--as-at", "as_at", metavar="TIME|BLOCK",
              help="The records as the dataset held them at that system time (RFC 3339) or block.")
@click.option("--state", is_flag=True,
              help="The table a snapshot or ledger root describes (one row per primary key, "
                   "removed keys gone) instead of its change records: the last rows to change.")
@click.option("--as-of", "as_of", metavar="TIME",
              help="With --state: the state as it stood at that event time (RFC 3339).")
@click.pass_context
def tail(ctx: click.Context, dataset: str, num: int, output: str, as_at: str | None, state: bool,
         as_of: str | None) -> None:
    """Show the last records of DATASET."""
    from ..metadata.timestamps import parse_timestamp
    from ..query.tail import state_tail
    from ..query.tail import tail as last_records

    if as_of is not None and not state:
        raise click.UsageError("--as-of reads a state: give --state")
    ds = workspace(ctx).dataset(dataset)
    records = (state_tail(ds, num, as_at, parse_timestamp(as_of) if as_of else None) if state
               else last_records(ds, num, as_at))
    Output(output).records(records)
