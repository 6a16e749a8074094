"""SQL over the workspace's datasets (``coord sql``), in DuckDB, read-only.

Every dataset with data is a view named by its id (``"com.example.orders"``, double quotes:
the dots are part of the name) over exactly the Parquet slices its chain names, oldest block
first; never a file no block names, nor one changed since its block recorded it (each is
checked first, ``trust.slice_check``). No short aliases: a name that is unambiguous today could
mean another dataset after the next ``coord add``, and a saved query must not change meaning.

Invariants:
- As at a time T, each dataset is read up to its newest block with system time <= T; as at a
  block, the dataset holding it is read up to that block and every other one as at its
  system time (the workspace as it stood when that block was committed).
- A statement is run only if DuckDB parses it as a query (SELECT, WITH, VALUES, DESCRIBE,
  SHOW, SUMMARIZE, EXPLAIN). The connection is then locked down before any of it runs:
  file access is off except for the slices (``allowed_paths``), extensions are neither
  installed nor loaded, and the configuration is locked, so ``read_csv('/etc/passwd')``,
  ``COPY``, ``ATTACH`` or ``SET`` cannot reach the host whatever the statement says.
- A query may come from a stranger: it can compute anything from the datasets and nothing
  else. From the command line it has no time limit beyond the user's patience (Ctrl-C
  interrupts it); ``query_limited`` (the HTTP API's) bounds its time and its rows.
"""
from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Invalid
from ..metadata.timestamps import format_timestamp, parse_timestamp
from ..trust.slice_check import checked_slices
from ..workspace import Workspace
from ..workspace.dataset import BlockNotFound

if TYPE_CHECKING:
    import pyarrow as pa

# DuckDB statement kinds that only read (DESCRIBE, SHOW and SUMMARIZE parse as SELECT)
READ_ONLY_KINDS = frozenset({"SELECT", "EXPLAIN"})


class SqlError(Invalid):
    pass


@dataclass(frozen=True)
class AsAt:
    """The moment the datasets are read at: a system time, and possibly one dataset's block."""

    time: datetime
    dataset: str | None = None
    block: bytes | None = None

    def describe(self) -> str:
        if self.block is not None:
            return f"as at block {self.block.hex()[:12]} of {self.dataset}"
        return f"as at {format_timestamp(self.time)}"


@dataclass(frozen=True)
class Statement:
    text: str
    kind: str  # DuckDB's statement type name
    offset: int  # where it starts in the script


def resolve_as_at(ws: Workspace, when: str) -> AsAt:
    """``when`` is a block hash (or a prefix of one, hex digits) or an RFC 3339 system time."""
    if not re.fullmatch(r"[0-9a-fA-F]+", when):
        return AsAt(parse_timestamp(when))
    found = [(ds.id, h, b.system_time) for ds in ws.datasets() for h, b in ds.blocks()
             if h.hex().startswith(when.lower())]
    if not found:
        raise BlockNotFound(f"--as-at {when}: no block of any dataset starts with {when}")
    if len(found) > 1:
        raise SqlError(f"--as-at {when}: matches {len(found)} blocks "
                       f"({', '.join(d for d, _, _ in found)}); give more digits")
    dataset, block, time = found[0]
    return AsAt(time, dataset, block)


def slice_files(ws: Workspace, as_at: AsAt | None = None) -> dict[str, list[Path]]:
    """Each dataset's Parquet slices, oldest first (as at ``as_at``), each checked against its
    block (``checked_slices``); datasets without any are left out."""
    tables = {}
    for ds in ws.datasets():
        stop = as_at.block if as_at is not None and as_at.dataset == ds.id else None
        by_time = as_at is not None and stop is None
        reached = stop is None
        blocks = []
        for h, block in ds.blocks():  # newest first
            reached = reached or h == stop
            if (reached and block.output_slice is not None
                    and not (by_time and block.system_time > as_at.time)):  # type: ignore[union-attr]
                blocks.append((h, block))
        if blocks:
            tables[ds.id] = checked_slices(ds, blocks[::-1])
    return tables


def split_script(script: str) -> list[Statement]:
    """The statements of ``script``, each checked to be a query; a syntax error or a statement
    that would change anything is refused with its position."""
    import duckdb

    try:
        parsed = duckdb.extract_statements(script)
    except duckdb.Error as e:
        raise SqlError(explain_error(e, script)) from None
    statements, offset = [], 0
    for p in parsed:
        offset = _find(script, p.query, offset)
        kind = p.type.name
        statement = Statement(p.query, kind, offset)
        if kind not in READ_ONLY_KINDS:
            line, column = _line_column(script, offset + len(p.query) - len(p.query.lstrip()))
            raise SqlError(f"line {line}, column {column}: {kind} statements are not allowed: "
                           "coord sql only reads (SELECT, WITH, VALUES, DESCRIBE, SHOW, EXPLAIN)")
        statements.append(statement)
        offset += len(p.query)
    return statements


class SqlSession:
    """A DuckDB connection holding the datasets as views, locked down (see the module doc)."""

    def __init__(self, ws: Workspace, as_at: AsAt | None = None):
        import duckdb

        self.as_at = as_at
        self.tables = slice_files(ws, as_at)
        self.empty = sorted({ds.id for ds in ws.datasets()} - self.tables.keys())
        self._spill = tempfile.TemporaryDirectory(prefix="coord-sql-")
        self._con = duckdb.connect(config={
            "autoinstall_known_extensions": False, "autoload_known_extensions": False,
            "temp_directory": self._spill.name,
        })
        con = self._con
        con.execute("SET TimeZone = 'UTC'")
        # DuckDB draws a progress bar on stdout when it takes the process for an interactive
        # one (python -c, a notebook), which would mix it into our output
        con.execute("SET enable_progress_bar = false")
        for name, files in self.tables.items():
            paths = ", ".join(_literal(str(f)) for f in files)
            try:
                con.execute(f"CREATE VIEW {_identifier(name)} AS "
                            f"SELECT * FROM read_parquet([{paths}], union_by_name = true)")
            except duckdb.Error as e:
                raise SqlError(f"dataset {name}: its slices cannot be read ({explain_error(e, '')}); "
                               f"run coord verify {name}") from None
        allowed = ", ".join(_literal(str(f)) for files in self.tables.values() for f in files)
        con.execute(f"SET allowed_paths = [{allowed}]")
        con.execute(f"SET allowed_directories = [{_literal(self._spill.name)}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._con.close()
        self._spill.cleanup()

    def query(self, statement: Statement, script: str, max_rows: int | None = None) -> pa.Table:
        """Run one checked statement (its first ``max_rows`` rows only, if given); errors name
        their place in ``script``."""
        import duckdb

        try:
            relation = self._con.sql(statement.text)
            if max_rows is not None:
                relation = relation.limit(max_rows)
        except duckdb.Error as e:
            error: Exception = e
            try:  # the relational API drops the position; the same bind error again carries it
                self._con.execute(statement.text)
            except duckdb.Error as positioned:
                error = positioned
            raise SqlError(self._explain(error, statement, script)) from None
        try:
            return relation.to_arrow_table()
        except duckdb.Error as e:
            raise SqlError(self._explain(e, statement, script)) from None

    def run(self, script: str) -> Iterator[pa.Table]:
        """Each statement's result in turn."""
        for statement in split_script(script):
            yield self.query(statement, script)

    def interrupt(self) -> None:
        self._con.interrupt()

    def _explain(self, e: Exception, statement: Statement, script: str) -> str:
        text = explain_error(e, script, statement.offset)
        missing = re.search(r'Table with name "?([^"!]+?)"? does not exist', str(e))
        if missing:
            name = missing.group(1)
            if name in self.empty:
                return f"{text} (dataset {name} holds no data {self._when()})"
            quoted = next((d for d in self.tables if d.endswith(name)), None)
            if quoted:
                text += f' (a dataset is named with double quotes: FROM "{quoted}")'
        return text

    def _when(self) -> str:
        return self.as_at.describe() if self.as_at else "yet"


class QueryTimeout(SqlError):
    pass


def query_limited(ws: Workspace, text: str, *, max_rows: int, seconds: float,
                  as_at: str | None = None) -> tuple[pa.Table, bool]:
    """One query's first ``max_rows`` rows, and whether there were more; interrupted (and
    refused) after ``seconds``."""
    import threading

    statements = split_script(text)
    if len(statements) != 1:
        raise SqlError(f"give exactly one query, not {len(statements)}")
    with SqlSession(ws, resolve_as_at(ws, as_at) if as_at else None) as session:
        timer = threading.Timer(seconds, session.interrupt)
        timer.start()
        try:
            table = session.query(statements[0], text, max_rows + 1)
        except SqlError:
            if not timer.is_alive():
                raise QueryTimeout(f"the query ran longer than {seconds:g} s and was stopped") from None
            raise
        finally:
            timer.cancel()
    return table.slice(0, max_rows), table.num_rows > max_rows


def explain_error(e: Exception, script: str, offset: int = 0) -> str:
    """DuckDB's message on one line, its caret turned into the line and column of ``script``
    (``offset``: where the statement DuckDB ran starts in it)."""
    message = str(e)
    first = message.split("\n\n")[0].replace("\n", " ")
    where = re.search(r"^LINE (\d+): (.*)\n( *)\^", message, re.M)
    if not where:
        return first
    n, snippet = int(where.group(1)), where.group(2)
    column = len(where.group(3)) - len(f"LINE {n}: ") + 1  # in the line as DuckDB shows it
    start_line, start_column = _line_column(script, offset)
    line = start_line + n - 1
    if snippet.startswith("..."):  # DuckDB shows a window of a long line
        lines = script.splitlines()
        shown = snippet[3:].removesuffix("...")
        at = lines[line - 1].find(shown) if line <= len(lines) else -1
        column += (at if at >= 0 else 0) - 3 - (start_column - 1 if n == 1 else 0)
    if n == 1:
        column += start_column - 1
    return f"line {line}, column {column}: {first}"


def _find(script: str, text: str, start: int) -> int:
    at = script.find(text, start)
    return at if at >= 0 else start


def _line_column(script: str, offset: int) -> tuple[int, int]:
    before = script[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
