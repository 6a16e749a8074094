"""``coord system engines``: the engines running for this workspace, and stopping them."""
from __future__ import annotations

import click

from .console import out
from .console import workspace as _ws


@click.group()
def system() -> None:
    """Look after the machinery of the workspace (the engines its commands start)."""


@system.command("engines")
@click.option("--stop", is_flag=True, help="Stop them (a command using one then fails).")
@click.pass_context
def engines(ctx: click.Context, stop: bool) -> None:
    """List the engines running for this workspace (containers and sandboxes)."""
    from rich.table import Table

    from ..engine import reaper

    found = reaper.engines(_ws(ctx))
    if not found:
        out.print("no engines running for this workspace")
        return
    table = Table("run", "runtime", "engine", "command", box=None)
    for engine in found:
        table.add_row(engine.run_id, engine.runtime, engine.name,
                      "running" if engine.alive else "dead (the engine is exiting)")
    out.print(table)
    if stop:
        for engine in found:
            engine.stop()
        out.print(f"stopped {len(found)} engine{'' if len(found) == 1 else 's'}")
