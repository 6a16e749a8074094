"""``coord tail``: the last records of a dataset, now or as at a system time or block."""
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
@click.pass_context
def tail(ctx: click.Context, dataset: str, num: int, output: str, as_at: str | None) -> None:
    """Show the last records of DATASET."""
    from ..query.tail import tail as last_records

    Output(output).records(last_records(workspace(ctx).dataset(dataset), num, as_at))
