"""``coord push``: a dataset's new blocks and files uploaded to a repository."""
from __future__ import annotations

import click

from .context import complete_dataset, workspace
from .output import Output


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--to", "to", metavar="REPO[/NAME]", help="Where to push (default: where it went last).")
@click.pass_context
def push(ctx: click.Context, dataset: str, to: str | None) -> None:
    """Upload DATASET's new blocks and files to a repository."""
    from .. import repository

    show = Output()
    result = repository.push_dataset(workspace(ctx), dataset, to, progress=show.progress())
    mb = f" ({result.files} files, {result.bytes / 1e6:,.1f} MB)" if result.files else ""
    show.line(result.message + mb)
