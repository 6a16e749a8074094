"""``coord init``: a workspace and its signing key."""
from __future__ import annotations

from pathlib import Path

import click

from .output import Output


@click.command()
@click.argument("path", type=click.Path(file_okay=False), default=".")
def init(path: str) -> None:
    """Create a workspace (and its signing key) in PATH."""
    from ..workspace import Workspace

    ws = Workspace.init(Path(path))
    Output().line(f"Initialised workspace in {ws.meta}")
