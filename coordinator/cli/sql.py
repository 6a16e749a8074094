"""``coord sql``: queries over the workspace's datasets (DuckDB), one-shot or interactive."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import CoordError
from .context import workspace
from .output import Output, write_records

if TYPE_CHECKING:
    import pyarrow as pa

    from ..query.sql import AsAt, SqlSession
    from ..workspace import Workspace

FORMATS = ["table", "csv", "json", "parquet"]


@click.command("sql")
@click.option("--command", "-c", "command", metavar="QUERY", help="Run QUERY (statements separated by ;).")
@click.option("--file", "-f", "file", type=click.Path(exists=True, dir_okay=False),
              help="Run the statements of FILE.")
@click.option("--as-at", "as_at", metavar="TIME|BLOCK",
              help="Read every dataset as it was at that system time (RFC 3339), or at that "
                   "block (a hash or its prefix; the other datasets as at its system time).")
@click.option("--as-of", "as_of", metavar="TIME",
              help='Read each state ("<id>@state") as it stood at that event time (RFC 3339).')
@click.option("--output", "-o", type=click.Choice(FORMATS), default="table", show_default=True,
              help="csv with a header line; json: a list of records; parquet needs --out.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False),
              help="Write the result to this file (written whole or not at all).")
@click.option("--max-rows", default=1000, show_default=True, help="Rows a table shows at most.")
@click.option("--receipt", "receipt_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write a signed receipt of the answer to FILE (one query; checked with "
                   "coord verify-receipt FILE).")
@click.pass_context
def sql(ctx: click.Context, command: str | None, file: str | None, as_at: str | None, as_of: str | None,
        output: str, out_file: str | None, max_rows: int, receipt_file: str | None) -> None:
    """Query the datasets with SQL: interactive on a terminal, else -c, -f or standard input.

    \b
    Each dataset is a table named by its id, in double quotes:
      coord sql -c 'SELECT origin, count(*) FROM "nyc.flights" GROUP BY origin'
    A snapshot or ledger root is also the table it describes, one row per primary key
    (its id is its change records):
      coord sql -c 'SELECT count(*) FROM "nyc.airlines@state"'
    The dialect is DuckDB's (https://duckdb.org/docs/sql/introduction); transforms in
    manifests stay Spark SQL. Only queries run: statements that change anything are refused,
    and a query reads the datasets' own Parquet slices and no other file.
    """
    from ..metadata.timestamps import parse_timestamp
    from ..query.sql import resolve_as_at

    if command is not None and file is not None:
        raise click.UsageError("give either -c QUERY or -f FILE")
    if output == "parquet" and out_file is None:
        raise click.UsageError("-o parquet needs --out FILE")
    if output == "table" and out_file is not None:
        raise click.UsageError("--out writes csv, json or parquet: give -o")
    ws = workspace(ctx)
    when = resolve_as_at(ws, as_at) if as_at else None
    if receipt_file is not None:
        from .receipt import answer_with_receipt

        if command is None and file is None and sys.stdin.isatty():
            raise click.UsageError("--receipt needs the query: -c QUERY, -f FILE or standard input")
        script = command if command is not None else (Path(file).read_text() if file else sys.stdin.read())
        results: list[pa.Table] | None = [answer_with_receipt(
            ws, script, when, parse_timestamp(as_of) if as_of else None, Path(receipt_file), file)]
    else:
        results = _results(ws, when, as_of, command, file, max_rows)
    if results is None:  # the interactive session ended
        return
    show = Output(output)
    if output == "table":
        for result in results:
            _show_table(show, result, max_rows)
        return
    if len(results) != 1:
        raise click.UsageError(f"-o {output} writes one result; the query has {len(results)} statements")
    if out_file is None:
        show.records(results[0])
    else:
        _write_file(results[0], output, Path(out_file))


def _results(ws: Workspace, when: AsAt | None, as_of: str | None, command: str | None,
             file: str | None, max_rows: int) -> list[pa.Table] | None:
    """Each statement's result, or None after an interactive session (on a terminal)."""
    from ..metadata.timestamps import parse_timestamp
    from ..query.sql import SqlError, SqlSession

    with SqlSession(ws, when, as_of=parse_timestamp(as_of) if as_of else None) as session:
        if command is None and file is None and sys.stdin.isatty():
            _repl(session, max_rows)
            return None
        script = command if command is not None else (
            Path(file).read_text() if file else sys.stdin.read())
        try:
            return list(session.run(script))
        except SqlError as e:
            raise SqlError(f"{file}: {e}") if file else e from None


def _repl(session: SqlSession, max_rows: int) -> None:
    import readline  # noqa: F401  (line editing and history for input())

    show = Output("table")
    show.note("SQL over the workspace's datasets (DuckDB dialect); end a statement with ; "
              "and leave with Ctrl-D.")
    if session.tables:
        show.note("datasets: " + ", ".join(f'"{t}"' for t in [*session.tables, *session.state_tables()]))
    buffer: list[str] = []
    while True:
        try:
            line = input("coord sql> " if not buffer else "       ..> ")
        except EOFError:
            show.note()
            return
        except KeyboardInterrupt:
            buffer = []
            show.note()
            continue
        buffer.append(line)
        script = "\n".join(buffer)
        if not script.strip() or not script.rstrip().endswith(";"):
            if not script.strip():
                buffer = []
            continue
        buffer = []
        try:
            for result in session.run(script):
                _show_table(show, result, max_rows)
        except CoordError as e:
            show.note(f"error: {e}")
        except KeyboardInterrupt:
            session.interrupt()
            show.note("interrupted")


def _show_table(show: Output, result: pa.Table, max_rows: int) -> None:
    show.records(result, null="NULL", max_rows=max_rows)
    shown = min(max_rows, result.num_rows)
    more = f", {shown:,} shown (--max-rows, or -o csv for all)" if shown < result.num_rows else ""
    show.line(f"({result.num_rows:,} row{'s' if result.num_rows != 1 else ''}{more})")


def _write_file(result: pa.Table, output: str, target: Path) -> None:
    """The result in a file that appears whole or not at all."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as sink:
            write_records(result, output, sink)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
