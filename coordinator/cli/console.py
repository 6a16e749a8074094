"""What every command shares: the consoles and the workspace of the invocation."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from ..reaper import reap
from ..workspace import Workspace
from ..workspace.served import refuse_if_served

# Piped output keeps whole lines: tables are not cut to 80 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 250)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def workspace(ctx: click.Context) -> Workspace:
    """The workspace, once what crashed commands left in it is cleaned up (said on stderr)."""
    root = ctx.find_root().obj.get("workspace")
    ws = Workspace.open(Path(root)) if root else Workspace.find()
    reaped = reap(ws)
    if reaped is not None:
        err.print(f"coord: {reaped}", markup=False)
    return ws


def writable_workspace(ctx: click.Context) -> Workspace:
    """The workspace for a command that writes: refused while ``coord serve`` runs on it."""
    ws = workspace(ctx)
    refuse_if_served(ws.meta)
    return ws


def short(h: bytes | None) -> str:
    return h.hex()[:12] if h else "-"
