"""The ``coord`` command line: the group, its global options, the table of its commands, and
how a failure ends.

Each command is a module of this package (a group of commands, e.g. ``repo``, ``trust``, one
module) that parses its arguments, calls a service and words the result through ``Output``
(output.py); ``COMMANDS`` below is where every one of them is registered.

Errors end as one line on stderr: ``coord: error: ...`` (exit 1) for a ``CoordError`` or the
machine's, ``coord: internal error: ...`` (exit 70) for a bug; ``--debug`` adds the traceback.
Every module a command needs is imported by that command: loading the group (what ``coord
--help`` does) imports click and the command modules only, and the commands that read only
metadata (``status``, ``list``, ``log``) never import Arrow, JSON Schema or the engine.

The ``coord`` process (``run``, the console script and ``python -m coordinator.cli``) ends
without Python's teardown of its modules, once the command and the exit handlers are done and
its output flushed: that teardown (Arrow, numpy, the metadata model) took 70-90 ms of every
command and does nothing a later process sees. ``main`` alone, as tests call it in their own
process, returns or raises ``SystemExit`` as usual.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading

import click

from ..errors import CoordError
from .add import add
from .block import block
from .compact import compact
from .completions import completions
from .config import config
from .delete import delete
from .diff import diff
from .ingest import ingest
from .init import init
from .lineage import lineage_
from .list import list_
from .log import log
from .output import Output, set_verbosity
from .provenance import provenance_
from .publish import publish_
from .pull import pull
from .push import push
from .receipt import verify_receipt
from .repo import repo
from .reset import reset
from .schema import schema
from .serve import serve
from .sql import sql
from .status import status_
from .system import system
from .tail import tail
from .trust import trust_
from .upgrade import upgrade
from .verify import verify_

SPEC = "Open Data Fabric 0.18 and 0.39"  # the metadata formats a workspace stores chains in


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="odf-coordinator", prog_name="coord",
                      message=f"%(prog)s %(version)s ({SPEC})")
@click.option("--workspace", "-w", type=click.Path(file_okay=False), envvar="COORD_WORKSPACE",
              help="Workspace folder (default: the nearest one with a .coord folder).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("--quiet", "-q", is_flag=True, help="Results and errors only: no notes, no progress.")
@click.option("--verbose", "-v", is_flag=True, help="Also how each step went (engine lines, timings).")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, debug: bool, quiet: bool, verbose: bool) -> None:
    """coord: datasets as verifiable, hash-linked event logs (Open Data Fabric)."""
    if quiet and verbose:
        raise click.UsageError("-q and -v say opposite things: give one")
    set_verbosity(-1 if quiet else 1 if verbose else 0)
    ctx.obj = {"workspace": workspace, "debug": debug}


COMMANDS: tuple[click.Command, ...] = (
    init, add, list_, status_, log, schema, tail, diff, pull, ingest, lineage_, provenance_, sql, verify_,
    verify_receipt,
    repo, push, publish_, trust_, config, system, block, serve, reset, delete, upgrade, compact,
    completions,
)
for command in COMMANDS:
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv or bool(os.environ.get("COORD_DEBUG"))
    show = Output()
    try:
        code = cli.main(args=argv, prog_name="coord", standalone_mode=False)
    except click.exceptions.Abort:
        show.note("coord: aborted")
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        show.note("coord: interrupted")
        sys.exit(130)
    except Exception as e:  # every error ends as one line unless --debug
        if debug:
            import traceback

            traceback.print_exc()
        if _is_users(e):
            show.error(str(e))
            sys.exit(1)
        show.note(f"coord: internal error: {type(e).__name__}: {e} (run with --debug for the traceback)")
        sys.exit(INTERNAL_ERROR)
    if isinstance(code, int) and code:  # a command that ended with ctx.exit(code)
        sys.exit(code)


def run() -> None:
    """The ``coord`` process: ``main``, then the exit (see the module docstring)."""
    code: str | int | None = 0
    try:
        main()
    except SystemExit as e:
        code = e.code
    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.main_thread()):
        sys.exit(code)  # a thread still at work: Python's own exit waits for it
    atexit._run_exitfuncs()  # temporary folders, log handlers: what an exit must still do
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as sys.exit shows a message
        print(code, file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: Python's own exit says so as it always has
        sys.exit(code)
    os._exit(code)


INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug of ours, not the user's input


def _is_users(e: Exception) -> bool:
    """A refusal the user can act on (ours, or the machine's or the network's), not a bug."""
    if isinstance(e, CoordError | OSError):
        return True
    boto = sys.modules.get("botocore.exceptions")  # S3 unreachable, bad credentials
    return boto is not None and isinstance(e, boto.BotoCoreError | boto.ClientError)
