"""What every command shares: the consoles and the workspace of the invocation."""
from __future__ import annotations

import sys
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path

import click
from rich.console import Console

from ..metadata.timefmt import format_timestamp
from ..reaper import reap
from ..workspace import Workspace

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


def short(h: bytes | None) -> str:
    return h.hex()[:12] if h else "-"


def json_value(value):
    """Record values JSON has no type for: times in RFC 3339, decimals as text, bytes as hex."""
    if isinstance(value, datetime):
        return format_timestamp(value) if value.tzinfo else value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Decimal) and value.as_tuple().exponent == 0:
        return int(value)  # whole numbers (DuckDB sums BIGINTs as HUGEINT, a DECIMAL(38,0) in Arrow)
    return str(value)  # other decimals as text: exact
