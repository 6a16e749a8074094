"""``coord delete``: a dataset out of the workspace."""
from __future__ import annotations

import sys

import click

from .context import complete_dataset, writable_workspace
from .output import Output


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, dataset: str, yes: bool) -> None:
    """Delete DATASET from the workspace (asks first, unless --yes)."""
    from ..store.overview import CurrentDatasets
    from ..workspace import catalog

    if not yes:
        if not sys.stdin.isatty():  # a script must say so: nobody is there to answer
            raise click.UsageError(f"deleting {dataset} removes all its data: give --yes to confirm")
        click.confirm(f"Delete {dataset} and all its data?", abort=True)
    ws = writable_workspace(ctx)
    catalog.delete_dataset(ws, dataset, current=CurrentDatasets(ws).inputs)
    Output().line(f"deleted {dataset}")
