"""A query's DuckDB in a sandbox of its own (bubblewrap), reading the slices with its own
Parquet reader; the operating system, not DuckDB's settings alone, keeps it from writing.

Invariants:
- The sandbox holds only the system's programs and libraries (/usr and its merged-/usr links,
  the dynamic linker's cache), the Python runtime and the folders DuckDB and Arrow are imported
  from, the worker (``duckdb_worker.py``) and the checked slices, each file at a neutral path
  (``/slices/<n>``: no path of the machine shows inside), all read-only, and the root itself
  remounted read-only: nothing is writable, and there is no /tmp, /dev, /proc, home, /etc (but
  the linker's cache) nor workspace. No network, no other namespace shared (``--unshare-all``),
  no capabilities, a new session (no terminal), an empty environment, and it dies with the
  process that started it.
- Inside, DuckDB keeps the lockdown of the in-process path: external access off but for
  exactly the slices (``allowed_paths``), no spill directory, extensions neither installed nor
  loaded, the configuration locked; the parent checks every statement before sending it.
- The answer comes back as an Arrow IPC stream read batch by batch, so a caller that stops
  early (a row or byte bound) holds no more than it read. ``interrupt``, or ``close`` while a
  statement runs, kills the sandbox (started anew for the next statement); an idle one ends by
  the end of its input.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.bwrap_paths import python_paths, system_binds
from . import duckdb_worker
from .duckdb_worker import read_frame, write_frame

if TYPE_CHECKING:
    import pyarrow as pa

WORKER = "/query/worker.py"
SLICES = "/slices"
# the most slices a query's sandbox binds: bubblewrap's time grows with the square of its
# mounts (500: 2.3 s, 2,000: 29 s), so a query over more runs in-process (``SqlSession``),
# as before the sandbox, until they are bound otherwise (a compacted dataset has few)
MAX_MOUNTS = 256
# what the dynamic linker reads from /etc: nothing else of it is there
LINKER_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
PACKAGES = ("duckdb", "pyarrow")
STOP_SECONDS = 5  # for an idle sandbox to end by itself once its input ends


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot make a sandbox on this machine."""


class Failure(Exception):
    """DuckDB's error (``kind``: its exception class), or the sandbox's end; ``view``: the
    dataset whose view could not be made."""

    def __init__(self, message: str, kind: str, view: str | None = None):
        super().__init__(message)
        self.message, self.kind, self.view = message, kind, view


@dataclass(frozen=True)
class Setup:
    """What the sandbox's DuckDB is made of: its ``config`` at connect, statements run before the
    views are made (``before``) and after (``after``, the lockdown), the views (dataset name and
    its SQL, over ``/slices/<n>``), the files to bind there, and extra in-memory tables."""

    config: dict[str, Any]
    before: tuple[str, ...]
    views: tuple[tuple[str, str], ...]
    after: tuple[str, ...]
    files: tuple[Path, ...]
    extra: tuple[tuple[str, pa.Table], ...] = ()


def available() -> bool:
    return shutil.which("bwrap") is not None


def slice_path(n: int) -> str:
    """Where the ``n``-th bound file shows inside."""
    return f"{SLICES}/{n}"


def bwrap_command(files: Sequence[Path]) -> list[str]:
    """The bubblewrap command that runs the worker over ``files`` (see the module doc)."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--clearenv"]
    args += system_binds()
    for path in [*map(Path, LINKER_FILES), *python_paths(PACKAGES)]:
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", str(Path(duckdb_worker.__file__).resolve()), WORKER]
    for n, file in enumerate(files):
        args += ["--ro-bind", str(file), slice_path(n)]
    # bwrap's root is a tmpfs of its own: read-only too, so nothing at all is writable
    args += ["--remount-ro", "/", "--chdir", "/"]
    return [*args, "--", sys.executable, "-I", "-B", WORKER]


class SandboxedDuckDB:
    """One session's DuckDB in its sandbox, started at once (its setup answered while the
    caller goes on: Python and DuckDB take a while to start) and again after an interrupt."""

    def __init__(self, setup: Setup):
        self.setup = setup
        self._process: subprocess.Popen[bytes] | None = None
        self._memory_limit: str | None = None  # None: the setup not answered yet
        self._busy = False  # a statement sent and its answer not read to its end
        self._start()

    def _start(self) -> None:
        """Starts the sandbox and sends its setup; ``SandboxUnavailable`` if bubblewrap cannot
        make one."""
        import pyarrow as pa

        command = bwrap_command(self.setup.files)
        at = command.index("--")
        # bwrap reads its options from a file (a mount per slice could pass the command line's
        # bound) and tells on another once the sandbox is made, before the worker starts
        options = os.memfd_create("bwrap-options")
        made, told = os.pipe()
        try:
            os.write(options, b"".join(arg.encode() + b"\0" for arg in
                                       ["--info-fd", str(told), *command[1:at]]))
            os.lseek(options, 0, os.SEEK_SET)
            process = subprocess.Popen([command[0], "--args", str(options), *command[at:]],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, pass_fds=(options, told),
                                       start_new_session=True)  # Ctrl-C reaches us, we end it
        finally:
            os.close(options)
            os.close(told)
        with os.fdopen(made, "rb") as info:
            sandboxed = bool(info.read())
        self._process, self._memory_limit = process, None
        if not sandboxed:
            raise SandboxUnavailable(self._ended().message)
        assert process.stdin is not None
        setup = self.setup
        try:
            write_frame(process.stdin, json.dumps({
                "config": setup.config, "before": setup.before, "views": setup.views,
                "after": setup.after, "extra": [name for name, _ in setup.extra]}).encode())
            for _, table in setup.extra:
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    writer.write_table(table)
                write_frame(process.stdin, sink.getvalue().to_pybytes())
        except BrokenPipeError:
            pass  # it ended: told by its answer to the setup

    @property
    def memory_limit(self) -> str:
        """DuckDB's memory limit as it words it ("1.0 GiB"); a ``Failure`` if its setup failed."""
        if self._process is None:
            self._start()
        if self._memory_limit is None:
            reply = self._message()
            if reply is None:
                raise self._ended()
            if "error" in reply:
                self.close()
                raise Failure(reply["error"], reply["kind"], reply.get("view"))
            self._memory_limit = str(reply["memory_limit"])
        return self._memory_limit

    def _message(self) -> dict[str, Any] | None:
        assert self._process is not None and self._process.stdout is not None
        frame = read_frame(self._process.stdout)
        return json.loads(frame) if frame is not None else None

    def _ended(self) -> Failure:
        """The failure of a sandbox that ended without an answer (bubblewrap's own message,
        if it failed)."""
        assert self._process is not None and self._process.stderr is not None
        self._process.kill()
        said = self._process.stderr.read().decode(errors="replace").strip().splitlines()
        code = self._process.wait()
        self.close()
        if said and said[-1].startswith("bwrap:"):
            return Failure(said[-1], "SandboxError")
        return Failure(f"the query's process ended without an answer (exit code {code})", "Ended")

    def reader(self, text: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """The answer to ``text``, a checked statement: its schema, and its batches as the
        sandbox sends them (a ``Failure`` if DuckDB fails midway)."""
        import pyarrow as pa

        if self._busy:
            self.close()
        self.memory_limit  # noqa: B018  (started and set up, or the failure of its setup)
        assert self._process is not None and self._process.stdin is not None
        try:
            self._busy = True
            write_frame(self._process.stdin, json.dumps({"sql": text}).encode())
        except BrokenPipeError:
            raise self._ended() from None
        head = self._message()
        if head is None:
            raise self._ended()
        if "error" in head:
            self._busy = False
            raise Failure(head["error"], head["kind"])
        stream = pa.ipc.open_stream(self._process.stdout)
        return stream.schema, self._batches(stream)

    def _batches(self, stream: pa.RecordBatchStreamReader) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        try:
            yield from stream
        except (pa.ArrowInvalid, OSError):
            raise self._ended() from None
        tail = self._message()
        if tail is None:
            raise self._ended()
        self._busy = False
        if "error" in tail:
            raise Failure(tail["error"], tail["kind"])

    def interrupt(self) -> None:
        """Stops the running statement: its sandbox ends, the next statement starts another."""
        self.close()

    def close(self) -> None:
        """Ends the sandbox: at once if it is busy, else by the end of its input (the worker
        returns, and the time it took is counted as this process's children's)."""
        if self._process is not None:
            assert self._process.stdin is not None
            if self._busy:
                self._process.kill()
            try:
                self._process.stdin.close()
                self._process.wait(timeout=STOP_SECONDS)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
            for pipe in (self._process.stdout, self._process.stderr):
                if pipe is not None:
                    pipe.close()
            self._process = None
        self._busy = False
