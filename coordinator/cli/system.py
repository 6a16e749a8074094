"""``coord system engines``: the engines running for this workspace, and stopping them."""
from __future__ import annotations

import click

from .context import workspace
from .output import Output, count


@click.group()
def system() -> None:
    """Look after the machinery of the workspace (the engines its commands start)."""


@system.command("engines")
@click.option("--stop", is_flag=True, help="Stop them (a command using one then fails).")
@click.pass_context
def engines(ctx: click.Context, stop: bool) -> None:
    """List the engines running for this workspace (containers and sandboxes)."""
    from ..engine import reaper

    show = Output()
    found = reaper.engines(workspace(ctx))
    if not found:
        show.line("no engines running for this workspace")
        return
    show.table(("run", "runtime", "engine", "command"),
               ((engine.run_id, engine.runtime, engine.name,
                 "running" if engine.alive else "dead (the engine is exiting)") for engine in found))
    if stop:
        for engine in found:
            engine.stop()
        show.line(f"stopped {count(len(found), 'engine')}")
