"""What every command shares: the consoles and the workspace of the invocation.

Nothing heavy is imported here: rich is imported when something is first printed through
it, and the workspace when a command opens one, so ``coord --help`` pays for neither.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

    from ..workspace import Workspace


class LazyConsole:
    """A rich ``Console`` made on first use; attributes are the console's."""

    def __init__(self, **options: Any):
        self._options: dict[str, Any] = options
        self._console: Console | None = None

    def real(self) -> Console:
        """The console itself (for rich objects that take one, e.g. a progress bar)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


# Piped output keeps whole lines: tables are not cut to 80 columns.
out = LazyConsole(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 250)
err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)


def workspace(ctx: click.Context) -> Workspace:
    """The workspace, once what crashed commands left in it is cleaned up (said on stderr)."""
    from ..engine.reaper import reap
    from ..workspace import Workspace

    root = ctx.find_root().obj.get("workspace")
    ws = Workspace.open(Path(root)) if root else Workspace.find()
    reaped = reap(ws)
    if reaped is not None:
        err.print(f"coord: {reaped}", markup=False)
    return ws


class TextTable:
    """Left-aligned columns two spaces apart, headers first: the tables of the every-day
    commands (``list``, ``status``), printed without rich, whose table costs them a fifth of
    their run."""

    def __init__(self, *headers: str):
        self.rows: list[tuple[str, ...]] = [headers]

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def print(self) -> None:
        widths = [max(len(row[i]) for row in self.rows) for i in range(len(self.rows[0]))]
        click.echo("\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                             for row in self.rows))


def writable_workspace(ctx: click.Context) -> Workspace:
    """The workspace for a command that writes: refused while ``coord serve`` runs on it."""
    from ..workspace.served import refuse_if_served

    ws = workspace(ctx)
    refuse_if_served(ws.meta)
    return ws


def short(h: bytes | None) -> str:
    return h.hex()[:12] if h else "-"
