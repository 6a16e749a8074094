"""The workspace of the invocation, as every command opens it.

The workspace is imported when a command opens one, so ``coord --help`` does not pay for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .output import Output

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

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


def complete_dataset(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The workspace's dataset ids starting with ``incomplete``, for the shell's completion
    (``coord completions``); none outside a workspace."""
    from click.shell_completion import CompletionItem

    from ..errors import CoordError
    from ..workspace import Workspace

    root = ctx.find_root().params.get("workspace")  # the group's callback does not run while completing
    try:
        ws = Workspace.open(Path(root)) if root else Workspace.find()
        return [CompletionItem(ds.id) for ds in ws.datasets() if ds.id.startswith(incomplete)]
    except (CoordError, OSError):
        return []
