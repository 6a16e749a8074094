"""``coord delete``: a dataset out of the workspace."""
from __future__ import annotations

import sys

import click

from .context import writable_workspace
from .output import Output


@click.command()
@click.argument("dataset")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, dataset: str, yes: bool) -> None:
    """Delete DATASET from the workspace."""
    from ..workspace import catalog

    if not yes and sys.stdin.isatty():
        click.confirm(f"Delete {dataset} and all its data?", abort=True)
    catalog.delete_dataset(writable_workspace(ctx), dataset)
    Output().line(f"deleted {dataset}")
