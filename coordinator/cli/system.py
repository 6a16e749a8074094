"""``coord system engines``: the engines running for this workspace, and stopping them;
``coord system diagnose``: whether this machine can run engines, with a fix per failure;
``coord system prepare``: this machine's class archive of Spark, for faster engine starts."""
from __future__ import annotations

import click

from .context import workspace
from .output import Output, count


@click.group()
def system() -> None:
    """Look after the machinery of the workspace (the engines its commands start)."""


@system.command("diagnose")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def diagnose_(ctx: click.Context, output: str) -> None:
    """Check that engines can run here (packages, Java, sandbox, container API, image, disk).

    Exits 1 when engines cannot start as configured; outside a workspace, for the defaults."""
    from pathlib import Path

    from ..engine.diagnose import CheckStatus, diagnose
    from ..engine.session import engine_settings
    from ..workspace.workspace import NoWorkspace, Workspace

    root = ctx.find_root().obj.get("workspace")
    try:
        ws: Workspace | None = Workspace.open(Path(root)) if root else Workspace.find()
    except NoWorkspace:
        ws = None
    checks = diagnose(engine_settings(ws), ws.root if ws is not None else Path.cwd())
    show = Output()
    if output == "json":
        show.json([{"check": c.name, "status": c.status.value, "detail": c.detail, "fix": c.fix or None}
                   for c in checks])
    else:
        rows = ((c.name, c.status.value, c.detail + (f"\n  fix: {c.fix}" if c.fix else "")) for c in checks)
        show.table(("check", "status", "detail"), rows)
    if any(c.status is CheckStatus.FAIL for c in checks):
        ctx.exit(1)


@system.command("prepare")
def prepare() -> None:
    """Make engines in the sandbox start faster: archive Spark's classes for this machine's JVM.

    Once per machine and Java or Spark version (about a minute); the container image has its
    own. Without it engines work as well, only slower to start."""
    from ..engine.sandbox import prepare_class_archive

    archive, made = prepare_class_archive()
    size = archive.stat().st_size / 1e6
    Output().line(f"{'made' if made else 'already made'}: {archive} ({size:.0f} MB)")


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
               ((engine.run_id, engine.runtime, engine.name, _state(engine)) for engine in found))
    if stop:
        for engine in found:
            engine.stop()
        show.line(f"stopped {count(len(found), 'engine')}")


def _state(engine) -> str:
    if engine.warm is not None:
        if engine.warm.commands:
            return f"warm: in use by {count(engine.warm.commands, 'command')}"
        return f"warm: idle, ends {engine.warm.keep_warm:g} s after its last use"
    return "running" if engine.alive else "dead (the engine is exiting)"
