"""``coord init``: a workspace and its signing key."""
from __future__ import annotations

from pathlib import Path

import click

from .output import Output

VERSIONS = ("0.18", "0.39")  # workspace.config.OdfVersion, spelled here so --help imports no workspace


@click.command()
@click.argument("path", type=click.Path(file_okay=False), default=".")
@click.option("--odf", type=click.Choice(VERSIONS), default="0.39", show_default=True,
              help="The Open Data Fabric version new datasets are stored in (a pulled dataset "
                   "keeps its own): 0.39, the current specification's, which the reference "
                   "implementation reads and writes, or 0.18, the seed's format.")
def init(path: str, odf: str) -> None:
    """Create a workspace (and its signing key) in PATH."""
    from ..workspace import Workspace
    from ..workspace.config import OdfVersion

    ws = Workspace.init(Path(path), OdfVersion(odf))
    Output().line(f"Initialised workspace in {ws.meta} (new datasets: ODF {odf})")
