"""The DuckDB of one ``coord sql`` session, run inside the query sandbox (``sandboxed.py``).

This file runs as a script in the sandbox, which holds the Python runtime, DuckDB, Arrow and
the slices (each at ``/slices/<n>``) and nothing else: it imports only the standard library,
``duckdb`` and ``pyarrow``, never the coordinator. It trusts its parent, which checked the
slices and every statement before sending them.

The conversation, on standard input and output, each message a frame (``write_frame``):
- in: the setup (JSON: settings, the views' files and SQL, the names of extra tables), then one
  Arrow IPC stream per extra table; out: ``{"memory_limit": ...}`` or a failure.
- then, per statement, in: ``{"sql": ...}``; out: a failure, or ``{"ok": true}``, the answer as
  an Arrow IPC stream (batch by batch, as DuckDB computes it) and a last frame, ``{"ok": true}``
  or the failure that cut the answer short.
A failure is ``{"error": DuckDB's message, "kind": its exception class, "view": the dataset whose
view could not be made, if that failed}``.
"""
from __future__ import annotations

import json
import os
import struct
import sys
from typing import IO, Any

LENGTH = struct.Struct(">Q")


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame's payload; None at the end of the stream."""
    head = stream.read(LENGTH.size)
    if len(head) < LENGTH.size:
        return None
    (size,) = LENGTH.unpack(head)
    payload = stream.read(size)
    return payload if len(payload) == size else None


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(LENGTH.pack(len(payload)) + payload)
    stream.flush()


def write_message(stream: IO[bytes], message: dict[str, Any]) -> None:
    write_frame(stream, json.dumps(message).encode())


def failure(e: BaseException, view: str | None = None) -> dict[str, Any]:
    return {"error": str(e), "kind": type(e).__name__, "view": view}


def main() -> None:
    import duckdb
    import pyarrow as pa

    source = sys.stdin.buffer
    # the answers go to a private copy of standard output; anything else that writes there
    # (a library's message) goes to standard error instead of into an answer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    setup = json.loads(read_frame(source) or b"{}")
    extra = {}
    for name in setup["extra"]:
        extra[name] = pa.ipc.open_stream(read_frame(source) or b"").read_all()
    try:
        con = connect(setup, extra)
    except _ViewFailed as e:
        write_message(answers, failure(e.cause, e.view))
        return
    except duckdb.Error as e:
        write_message(answers, failure(e))
        return
    limit = con.execute("SELECT current_setting('memory_limit')").fetchall()
    write_message(answers, {"memory_limit": str(limit[0][0])})
    while (frame := read_frame(source)) is not None:
        answer(con, json.loads(frame)["sql"], answers)


class _ViewFailed(Exception):
    def __init__(self, view: str, cause: Exception):
        super().__init__(str(cause))
        self.view, self.cause = view, cause


def connect(setup: dict[str, Any], extra: dict[str, Any]) -> Any:
    """A connection holding the views, then locked: DuckDB may open exactly the slices."""
    import duckdb

    con = duckdb.connect(config=setup["config"])
    for statement in setup["before"]:
        con.execute(statement)
    for name, sql in setup["views"]:
        try:
            con.execute(sql)
        except duckdb.Error as e:
            raise _ViewFailed(name, e) from None
    for name, table in extra.items():
        con.register(name, table)
    for statement in setup["after"]:
        con.execute(statement)
    return con


def answer(con: Any, text: str, out: IO[bytes]) -> None:
    import duckdb
    import pyarrow as pa

    try:
        reader = relation(con, text).arrow()
    except duckdb.Error as e:
        write_message(out, failure(e))
        return
    write_message(out, {"ok": True})
    cut: dict[str, Any] = {"ok": True}
    with pa.ipc.new_stream(out, reader.schema) as writer:
        try:
            for batch in reader:
                writer.write_batch(batch)
        except (duckdb.Error, pa.ArrowException, MemoryError) as e:
            cut = failure(e)
    out.flush()
    write_message(out, cut)


def relation(con: Any, text: str) -> Any:
    import duckdb

    try:
        return con.sql(text)
    except duckdb.Error as e:
        error: Exception = e
        try:  # the relational API drops the position; the same bind error again carries it
            con.execute(text)
        except duckdb.Error as positioned:
            error = positioned
        raise error from None


if __name__ == "__main__":
    main()
