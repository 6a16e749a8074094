"""``coord block hash``: single metadata blocks (the hash of one given as YAML or as stored)."""
from __future__ import annotations

import click

from .output import Output


@click.group()
def block() -> None:
    """Work with single metadata blocks."""


@block.command("hash")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: the hash with the block's ODF version and encoding.")
def block_hash(file: str, output: str) -> None:
    """Print the hash of a metadata block: a YAML manifest (ODF 0.18 or current) or a stored
    FlatBuffers block of either version."""
    from ..metadata.block_file import hash_block_file

    found = hash_block_file(file)
    show = Output(output)
    if output == "json":
        show.json({"hash": found.hash, "odf": found.odf, "encoding": found.encoding,
                   "manifestVersion": found.manifest_version})
        return
    show.line(found.hash)
    form = "a stored block" if found.encoding == "flatbuffers" else "a YAML manifest"
    envelope = f", hashed as a version-{found.manifest_version} manifest" if found.manifest_version else ""
    show.note(f"{file}: ODF {found.odf} MetadataBlock, {form}{envelope}")
