"""``coord block hash``: single metadata blocks (the blockHash of one given as YAML)."""
from __future__ import annotations

import click

from .output import Output


@click.group()
def block() -> None:
    """Work with single metadata blocks."""


@block.command("hash")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def block_hash(file: str) -> None:
    """Print the blockHash of a MetadataBlock given as a YAML manifest."""
    from ..metadata.block_hash import compute_hash
    from ..metadata.manifest import load_manifest
    from ..metadata.objects import MetadataBlock

    obj = load_manifest(file, unsealed=True)
    if not isinstance(obj, MetadataBlock):
        raise click.UsageError(f"{file} holds a {type(obj).__name__}, not a MetadataBlock")
    Output().line(compute_hash(obj).hex())
