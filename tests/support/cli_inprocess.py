"""``coord`` run in the test's own process (click's runner over the real command group): for
tests of what a command answers, where a child process (``cli.coord``) is not the point.

Output goes through the same ``Output`` as in a process of its own; a ``CoordError`` is left
in ``result.exception`` (in a process, ``main`` prints it as one line: see cli/test_errors.py).
"""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from coordinator.cli.main import cli


def run_coord(home: Path, *args: str, ok: bool = True) -> Result:
    """``coord -w HOME ARGS``; ``ok``: it must succeed (else the test fails with what it said)."""
    result = CliRunner().invoke(cli, ["-w", str(home), *args])
    if ok and result.exit_code != 0:
        raise AssertionError(f"coord {' '.join(args)} failed ({result.exit_code}): "
                             f"{result.output}{result.exception!r}")
    return result
