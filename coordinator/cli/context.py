"""The workspace of the invocation, as every command opens it.

The workspace is imported when a command opens one, so ``coord --help`` does not pay for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .output import Output

if TYPE_CHECKING:
    from ..workspace import Workspace


def workspace(ctx: click.Context) -> Workspace:
    """The workspace, once what crashed commands left in it is cleaned up (said on stderr)."""
    from ..engine.reaper import reap
    from ..workspace import Workspace

    root = ctx.find_root().obj.get("workspace")
    ws = Workspace.open(Path(root)) if root else Workspace.find()
    reaped = reap(ws)
    if reaped is not None:
        Output().note(f"coord: {reaped}")
    return ws


def writable_workspace(ctx: click.Context) -> Workspace:
    """The workspace for a command that writes: refused while ``coord serve`` runs on it."""
    from ..workspace.served import refuse_if_served

    ws = workspace(ctx)
    refuse_if_served(ws.meta)
    return ws
