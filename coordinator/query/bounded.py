"""One query for the HTTP API (``GET /api/sql``), bounded in time, memory, rows and bytes.

Invariants:
- The query runs in a process of its own, forked from a server that has DuckDB and Arrow
  imported (a few milliseconds a query); the time limit counts from that process's start, so
  parsing, planning and running are all inside it, and at the limit the process is killed:
  DuckDB does not look at an interrupt while it plans, and a 100 KB ``UNION ALL`` plans for
  seconds. Nothing is lost with it: the query wrote nothing. Its DuckDB runs in a sandbox that
  process starts (``sql.py``), which dies with it.
- The answer is JSON built in that process row by row, and stops at ``max_rows`` rows or
  before the rows' JSON would pass ``max_bytes``; ``truncatedBy`` says which (``limit`` or
  ``maxBytes``), ``truncated`` whether rows were left out. The server holds no more than one
  bounded answer per query.
- The query's process may map at most ``memory`` bytes more than it held when it started
  (``RLIMIT_DATA``, with Arrow allocating through the system's allocator so that its batches
  count), and DuckDB holds at most ``DUCKDB_SHARE`` of that (its ``memory_limit``, with no
  spill folder; its sandbox inherits the process's limit as well); the rest is Arrow's
  batches read ahead, the answer and Python. Past either
  the query is refused (``Invalid``: ask for less) and the process ends; the server, another
  process, holds none of it.
- A refusal keeps its category (a bad query is ``Invalid``, an unknown block ``NotFound``);
  a process that ends without an answer (a crash) is ``Unavailable``.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CoordError, Invalid, Unavailable, category
from ..metadata.timestamps import parse_timestamp
from ..workspace import Workspace
from .sql import MemoryExceeded, SqlError, SqlSession, resolve_as_at, split_script

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext

    import pyarrow as pa

# what the fork server imports once, so that a query's process starts at once
PRELOAD = ["duckdb", "pyarrow", "pyarrow.dataset", "pyarrow.parquet", "coordinator.query.bounded"]
DUCKDB_SHARE = 0.5  # of a query's memory bound, DuckDB's memory_limit


@dataclass(frozen=True)
class Bounds:
    max_rows: int
    max_bytes: int  # of the rows' JSON
    seconds: float
    memory: int  # bytes the query's process may take


class QueryTimeout(SqlError):
    pass


class QueryDied(Unavailable):
    pass


def bounded_query(root: Path, text: str, bounds: Bounds, as_at: str | None = None,
                  as_of: str | None = None, receipt: bool = False) -> bytes:
    """The JSON answer to one query over the workspace at ``root`` (read as at ``as_at``, its
    states as of event time ``as_of``): ``{"columns", "rows", "truncated", "truncatedBy"}``;
    with ``receipt``, and ``"receipt"``: the signed receipt of the whole answer
    (``receipt.py``), signed here, by the server, not in the query's process."""
    context = _context()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_answer, args=(send, root, text, bounds, as_at, as_of, receipt),
                            daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(bounds.seconds):
            raise QueryTimeout(f"the query ran longer than {bounds.seconds:g} s and was stopped")
        try:
            outcome = receive.recv()
        except EOFError:
            child.join()
            raise QueryDied(f"the query's process ended without an answer (exit code {child.exitcode}); "
                            f"it may have needed more than its {bounds.memory >> 20} MiB of memory "
                            "(serve.sqlMemory)") from None
    finally:
        child.kill()
        child.join()
        receive.close()
    if isinstance(outcome, BaseException):
        raise outcome
    if isinstance(outcome, tuple):  # the answer and its receipt, to sign
        from .receipt import sign

        answer, unsigned = outcome
        signed = json.dumps(sign(Workspace.open(root), unsigned), ensure_ascii=False)
        return answer[:-1] + f', "receipt": {signed}}}'.encode()
    return outcome


def _context() -> ForkServerContext:
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _answer(send: Connection, root: Path, text: str, bounds: Bounds, as_at: str | None,
            as_of: str | None, receipt: bool = False) -> None:
    """In the query's process: the answer (with its receipt unsigned), or the refusal, sent whole."""
    import traceback

    try:
        _bound_memory(bounds.memory)
        ws = Workspace.open(root)
        outcome: bytes | tuple[bytes, dict] | BaseException = (
            answer_with_receipt(ws, text, bounds, as_at, as_of) if receipt
            else answer_json(ws, text, bounds, as_at, as_of))
    except (MemoryExceeded, MemoryError):  # DuckDB's share, or the process's bound
        outcome = Invalid(f"the query needed more than the {bounds.memory >> 20} MiB of memory a query "
                          "may take (serve.sqlMemory) and was stopped; ask for less (fewer groups, "
                          "rows or columns, a LIMIT)")
    except CoordError as e:
        # sent as its category with its message: an error class whose __init__ takes more than
        # the message cannot be unpickled, and the category is what the server answers by
        outcome = category(e)(str(e))
    except Exception:  # a bug: its traceback goes to the service's log as the server's own
        outcome = RuntimeError(traceback.format_exc())
    send.send(outcome)
    send.close()


def _bound_memory(memory: int) -> None:
    """This process may map at most ``memory`` bytes more than it holds now."""
    import resource

    import pyarrow as pa

    # Arrow's default pool (mimalloc) reserved its arena in the fork server: what it hands out
    # from there would not count against the limit, what the system's allocator maps does
    pa.set_memory_pool(pa.system_memory_pool())
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmData:"))
    resource.setrlimit(resource.RLIMIT_DATA, (held + memory, held + memory))


def json_rows(batches: Iterable[pa.RecordBatch | pa.Table], max_rows: int | None,
              max_bytes: int | None) -> tuple[list[str], str | None]:
    """Each row's JSON, batch by batch as they come, stopping at ``max_rows`` rows or before
    the rows' JSON (joined by ", ") would pass ``max_bytes``; and ``limit`` or ``maxBytes``
    if it stopped so (None: every row)."""
    from .tail import json_value
    from .values import python_rows

    rows: list[str] = []
    size = 0
    for batch in batches:
        for row in python_rows(batch):
            encoded = json.dumps(row, default=json_value)
            if max_rows is not None and len(rows) == max_rows:
                return rows, "limit"
            if max_bytes is not None and size + len(encoded) + 2 > max_bytes:
                return rows, "maxBytes"
            rows.append(encoded)
            size += len(encoded) + 2  # and its ", "
    return rows, None


def answer_with_receipt(ws: Workspace, text: str, bounds: Bounds, as_at: str | None,
                        as_of: str | None) -> tuple[bytes, dict]:
    """``answer_json``'s answer, the whole answer computed first (its receipt hashes every row,
    in the query's order), and the receipt, not yet signed."""
    from .receipt import unsigned_receipt

    table, doc = unsigned_receipt(ws, text, resolve_as_at(ws, as_at) if as_at else None,
                                  parse_timestamp(as_of) if as_of else None,
                                  memory_limit=int(bounds.memory * DUCKDB_SHARE))
    rows, truncated_by = json_rows([table], bounds.max_rows, bounds.max_bytes)
    return _answer_bytes(table.column_names, rows, truncated_by), doc


def answer_json(ws: Workspace, text: str, bounds: Bounds, as_at: str | None, as_of: str | None) -> bytes:
    statements = split_script(text)
    if len(statements) != 1:
        raise SqlError(f"give exactly one query, not {len(statements)}")
    with SqlSession(ws, resolve_as_at(ws, as_at) if as_at else None,
                    as_of=parse_timestamp(as_of) if as_of else None,
                    memory_limit=int(bounds.memory * DUCKDB_SHARE)) as session:
        schema, batches = session.batches(statements[0], text)
        rows, truncated_by = json_rows(batches, bounds.max_rows, bounds.max_bytes)
    return _answer_bytes(schema.names, rows, truncated_by)


def _answer_bytes(columns: list[str], rows: list[str], truncated_by: str | None) -> bytes:
    head = json.dumps({"columns": columns})[:-1]
    tail = json.dumps({"truncated": truncated_by is not None, "truncatedBy": truncated_by})[1:]
    return f'{head}, "rows": [{", ".join(rows)}], {tail}'.encode()
