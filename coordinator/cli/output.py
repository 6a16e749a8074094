"""``Output``: how every ``coord`` command shows what it has to show.

The services decide; a command words their results and hands them to an ``Output``, made with
its ``-o`` choice where it has one (``Output(fmt)``; ``"text"`` where it has none): tables,
JSON, Arrow records, documents and lines on stdout; notes, errors and progress bars on stderr.
The commands print through nothing else, so that each kind of result is shown one way.

Whatever is shown may hold someone else's data (a pulled dataset's names and values, a file
name, an error quoting them), so it is shown as it is written and cannot restyle the
terminal: no rich markup or emoji codes are read from it (tables and lines are text; a
tree's markup takes data only through ``markup_literal``) and control characters (ESC
sequences, CR, BEL...) are shown escaped (``literal``). Only CSV written to a pipe or a file
keeps them, as the data it is.

Nothing heavy is imported here: rich is imported when something is first printed through it
(the plain columns and text of the every-day commands never are) and Arrow by the records.
"""
from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import click

from ..errors import Invalid

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console
    from rich.progress import Progress as RichBar


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
_out = LazyConsole(highlight=False, emoji=False, soft_wrap=True,
                   width=None if sys.stdout.isatty() else 250)
_err = LazyConsole(stderr=True, highlight=False, emoji=False, soft_wrap=True)

# C0 and C1 controls (but newline and tab) and the bidirectional overrides, which reorder
# what a terminal shows; in a table cell or a column, newline and tab too.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CELL_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
          "\x1b": "\\e"}


def literal(text: str, cell: bool = False) -> str:
    """TEXT with its control characters escaped (``\\e[31m``, ``\\r``, ``\\x07``...), as a
    terminal must show someone else's data; ``cell``: newline and tab too (one line of a table)."""
    return (_CELL_CONTROLS if cell else _CONTROLS).sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def markup_literal(text: str) -> str:
    """TEXT as a piece of a rich markup string (a tree's label): shown as written."""
    from rich.markup import escape

    return escape(literal(text))


# -q (-1): results and errors only, no notes or progress; -v (1): also each step's details.
_verbosity = 0


def set_verbosity(level: int) -> None:
    global _verbosity
    _verbosity = level
    notes = logging.getLogger("coordinator")  # the lower layers' notes (INFO): details at -v
    if level > 0 and not any(isinstance(h, _Details) for h in notes.handlers):
        notes.addHandler(_Details())
        notes.setLevel(logging.INFO)


class _Details(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        Output().detail(f"coord: {record.getMessage()}")


class Output:
    """What one command shows: results on stdout in its ``format``, messages on stderr.
    Results and errors are shown at every verbosity; notes and progress not with ``-q``;
    details only with ``-v``."""

    def __init__(self, format: str = "text"):
        self.format = format

    @property
    def quiet(self) -> bool:
        return _verbosity < 0

    @property
    def verbose(self) -> bool:
        return _verbosity > 0

    # -- stdout -----------------------------------------------------------------------------

    def line(self, text: str = "", end: str = "\n") -> None:
        """A line of words (literal; tabs become spaces, as rich shows them), written without
        rich: a command that prints only lines does not import it (~25 ms)."""
        click.echo(literal(text).expandtabs() + end, nl=False)

    def rich(self, renderable: Any) -> None:
        """A rich renderable (a tree) whose markup holds data only through ``markup_literal``."""
        _out.print(renderable)

    def text(self, text: str, nl: bool = True) -> None:
        """Text without rich (literal): a document (DOT, HTML, OpenLineage, JSON) or a line of
        a command that must not import rich."""
        click.echo(literal(text), nl=nl)

    def json(self, data: Any, default: Callable[[Any], Any] | None = None, highlight: bool = False) -> None:
        """DATA as JSON indented by two; ``highlight``: through rich's JSON view (coloured on a
        terminal, characters beyond ASCII as they are)."""
        if highlight:
            _out.print_json(json.dumps(data, default=default))
        else:
            self.text(json.dumps(data, indent=2, default=default))

    def columns(self, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
        """Left-aligned columns two spaces apart, headers first: the tables of the every-day
        commands (``list``, ``status``), printed without rich, whose table costs them a fifth
        of their run."""
        lines = [tuple(map(_cell, headers)), *(tuple(map(_cell, row)) for row in rows)]
        widths = [max(len(row[i]) for row in lines) for i in range(len(headers))]
        self.text("\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                            for row in lines))

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
        """A rich table without borders, every header and cell literal."""
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None)
        for header in headers:
            table.add_column(Text(_cell(header)))
        for row in rows:
            table.add_row(*(Text(_cell(c)) for c in row))
        _out.print(table)

    def records(self, data: pa.Table, null: str = "", max_rows: int | None = None) -> None:
        """Arrow records as the format says: ``json`` (a list of records), ``csv`` (with a
        header line), else a table of the first MAX_ROWS (all by default), a null shown as NULL."""
        if self.format == "json":
            self.text(_records_json(data))
        elif self.format == "csv" and sys.stdout.isatty():
            sink = io.BytesIO()
            write_records(data, "csv", sink)
            self.text(sink.getvalue().decode(), nl=False)
        elif self.format == "csv":
            sys.stdout.flush()
            write_records(data, "csv", sys.stdout.buffer)
        else:
            from ..query.values import cell_text, python_rows

            shown = data if max_rows is None else data.slice(0, max_rows)
            self.table(data.column_names, (tuple(null if v is None else cell_text(v) for v in row.values())
                                           for row in python_rows(shown)))

    # -- stderr -----------------------------------------------------------------------------

    def note(self, text: str = "") -> None:
        """A line on stderr (literal); not with ``-q``."""
        if not self.quiet:
            _err.print(literal(text), markup=False)

    def detail(self, text: str) -> None:
        """A line on stderr with ``-v`` only: how a step went (engine lines, timings)."""
        if self.verbose:
            _err.print(literal(text), markup=False)

    def error(self, message: str) -> None:
        """``coord: error: MESSAGE`` on stderr: a refusal the user can act on (always shown)."""
        _err.print(literal(f"coord: error: {message}"), markup=False)

    def failures(self, failed: list[tuple[str, str]], total: int, skipped: int) -> None:
        """The end of a run over several datasets that kept going: each (dataset, error) of
        ``failed``, and how many were skipped because they depend on one."""
        them = "it" if len(failed) == 1 else "them"
        also = f" ({skipped} skipped: they depend on {them})" if skipped else ""
        if len(failed) == 1:
            self.error(f"{_named(*failed[0])}{also}")
            return
        self.error(f"{len(failed)} of {total} datasets failed{also}:")
        for dataset_id, message in failed:
            _err.print(literal(f"  {_named(dataset_id, message)}"), markup=False)

    def warning(self, message: str) -> None:
        """``coord: warning: MESSAGE`` on stderr: something done that the user should know of
        (shown with ``-q`` too, as errors are)."""
        _err.print(literal(f"coord: warning: {message}"), markup=False)

    def progress(self) -> RichProgress:
        """The services' Progress protocol as a bar on stderr (none with ``-q``)."""
        return RichProgress(_err, shown=not self.quiet)

    def console(self) -> Console:
        """The rich console of stdout, for bars drawn above its lines (``coord pull``)."""
        return _out.real()


def unnamed(dataset_id: str, message: str) -> str:
    """``message`` without a leading ``DATASET: `` (errors of the work on one dataset start
    so), for a line that names the dataset first: the name once."""
    return message.removeprefix(f"{dataset_id}: ")


def _named(dataset_id: str, message: str) -> str:
    """``DATASET: MESSAGE`` with the name once; a message whose sentence starts with it (``DS
    is a derivative: ...``) as it is."""
    if message.startswith(f"{dataset_id} "):
        return message
    return f"{dataset_id}: {unnamed(dataset_id, message)}"


def _cell(text: str) -> str:
    return literal(text, cell=True)


def write_records(data: pa.Table, format: str, sink: Any) -> None:
    """Arrow records to a binary SINK as csv (with a header line; ``csv_table``), json or
    parquet (a column Parquet has no type for is refused naming it, before anything is written)."""
    if format == "csv":
        import pyarrow.csv as pacsv

        from ..query.values import csv_table

        pacsv.write_csv(csv_table(data), sink)
    elif format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        for field in data.schema:
            try:
                pq.ParquetWriter(io.BytesIO(), pa.schema([field])).close()
            except pa.ArrowNotImplementedError:
                raise Invalid(f"-o parquet: column {field.name} is {field.type}, which Parquet cannot hold; "
                              f'cast it in the query (CAST("{field.name}" AS VARCHAR))') from None
        pq.write_table(data, sink)
    else:
        sink.write(_records_json(data).encode() + b"\n")


def _records_json(data: pa.Table) -> str:
    from ..query.tail import json_value
    from ..query.values import python_rows

    return json.dumps(python_rows(data), indent=2, default=json_value)


class RichProgress:
    """The services' Progress protocol as a rich bar of bytes (silent when piped)."""

    def __init__(self, console: LazyConsole, shown: bool = True):
        self.console = console
        self.shown = shown
        self._bar: RichBar | None = None

    def start(self, total_bytes: int | None, description: str) -> None:
        if not self.shown:
            return
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as RichBar

        self._bar = RichBar(
            TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
            TransferSpeedColumn(), TimeRemainingColumn(), console=self.console.real(), transient=True,
            disable=not self.console.is_terminal,
        )
        self._bar.start()
        self._task = self._bar.add_task(literal(description, cell=True), total=total_bytes)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# -- words the commands share ----------------------------------------------------------------

def short(h: bytes | None) -> str:
    """The first twelve hex digits of a hash, or ``-``."""
    return h.hex()[:12] if h else "-"


def count(n: int, what: str) -> str:
    """``1 block``, ``2 blocks``."""
    return f"{n} {what}{'s' * (n != 1)}"
