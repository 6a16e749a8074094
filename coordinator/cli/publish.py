"""``coord publish DS --to-feed URL``: a dataset's new blocks as File Feed updates."""
from __future__ import annotations

import click

from .context import complete_dataset, workspace
from .output import Output


@click.command("publish")
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--to-feed", "url", required=True, metavar="URL",
              help="Feed location: file:///path/, s3://bucket/prefix/ or "
                   "s3+http(s)://host:port/bucket/prefix/.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet",
              show_default=True, help="Format of the part files.")
@click.option("--since-last", is_flag=True,
              help="Everything since the last publish as one update (default: one per block).")
@click.pass_context
def publish_(ctx, dataset, url, fmt, since_last):
    """Publish each new block of DATASET as a File Feed update (parts, _coord.json, _SUCCESS)."""
    from ..repository.publish import publish

    show = Output()
    result = publish(workspace(ctx), dataset, url, fmt=fmt, since_last=since_last,
                     progress=show.progress())
    show.line(f"{dataset}: {result.message}")
