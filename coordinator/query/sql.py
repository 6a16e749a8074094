"""SQL over the workspace's datasets (``coord sql``), in DuckDB, read-only.

Every dataset with data is a view named by its id (``"com.example.orders"``, double quotes:
the dots are part of the name) over exactly the Parquet slices its chain names, oldest block
first; never a file no block names, nor one changed since its block recorded it (each is
checked first, ``trust.slice_check``). A snapshot or ledger root is also ``"<id>@state"``,
the table it describes (``state.py``: one row per primary key, as of an event time if
given), a view over its change log. No short aliases: a name that is unambiguous today could
mean another dataset after the next ``coord add``, and a saved query must not change meaning.

Invariants:
- As at a time T, each dataset is read up to its newest block with system time <= T; as at a
  block, the dataset holding it is read up to that block and every other one as at its
  system time (the workspace as it stood when that block was committed).
- A statement is run only if DuckDB parses it as a query (SELECT, WITH, VALUES, DESCRIBE,
  SHOW, SUMMARIZE, EXPLAIN of a query: the statement an EXPLAIN [ANALYZE] names is checked
  as well, since EXPLAIN ANALYZE runs it).
- DuckDB reads the slices with its own Parquet reader inside a sandbox of its own
  (``sandboxed.py``, bubblewrap): it holds the checked slice files, each at a neutral path
  (``/slices/<n>``), the Python runtime and DuckDB, all read-only, and nothing else: no
  writable place, no network, no environment of ours, no home nor workspace; it dies with us.
  So the operating system, not DuckDB's settings alone, refuses every write. Inside, DuckDB
  is locked down as well: external access off but for exactly those files
  (``allowed_paths``), no spill directory (a query needing more memory than DuckDB's limit
  fails instead), no scan of Python variables, extensions neither installed nor loaded, the
  configuration locked. So ``read_csv('/etc/passwd')``, ``COPY``, ``ATTACH`` or ``SET``
  reach nothing, and no setting, plan or view names a path of the machine. The answer comes
  back as an Arrow IPC stream read batch by batch; an interrupt (Ctrl-C) or a caller's bound
  ends the sandbox.
- Where no sandbox can be made (no bubblewrap), or the query would read more slices than a
  sandbox binds (``sandboxed.MAX_MOUNTS``), the session runs in this process under the
  same lockdown, but DuckDB can reach no file at all: the slices are handed to it as Arrow
  datasets (read by Arrow, lazily, batch by batch), with no allowed path; several times slower.
- Nothing of the machine shows: DuckDB's home (and the extension and secret folders it
  derives from it) is ``NO_HOME``, so no setting (``duckdb_settings()``) or error names the
  user's home; an error naming a slice names it as the user has it, ``<workspace>`` for the
  workspace's folder.
- A query holds at most its memory bound (DuckDB's ``memory_limit``: a session's
  ``memory_limit``, else DuckDB's default, 80 % of RAM); past it, having nowhere to spill,
  it is refused in one line, ``MemoryExceeded``.
- A current-ODF (0.39) dataset is read the same way: the stored table of its slices (offset,
  op, system_time, event time, then the data columns, as the reference's ``kamu sql`` shows
  it), each file checked before it is read (``checked_current_scan``: a compacted file is read
  whole where every slice it holds is read); as at a block, its
  block is named by its multihash (``f1620...``) or the hex of its digest. A snapshot or
  ledger root's ``@state`` is the projection of its operation types (``state.py``).
- Columns are united by name as ``read_parquet(union_by_name)`` does: a column a later slice
  adds is null in the older ones; a type widened in a later slice (INT to BIGINT) is read as
  the wider type.
- A query may come from a stranger: it can compute anything from the datasets and nothing
  else. From the command line it has no time limit beyond the user's patience (Ctrl-C
  interrupts it); ``bounded.py`` bounds the HTTP API's in time, rows and bytes.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Invalid
from ..metadata.objects import DatasetSource, DatasetVocabulary
from ..metadata.timestamps import format_timestamp, parse_timestamp
from ..store.checked import checked_current_scan
from ..store.dataset import CurrentDataset
from ..store.read import SliceRecord, blocks_named
from ..trust.slice_check import checked_slices
from ..workspace import Dataset, Workspace
from ..workspace.config import OdfVersion
from ..workspace.dataset import BlockNotFound
from .state import STATE_SUFFIX, StateKey, Written, no_state, quoted, state_key, state_sql

if TYPE_CHECKING:
    import pyarrow as pa

    from ..metadata.odf39.adapt import PushSource
    from .sandboxed import SandboxedDuckDB

# DuckDB statement kinds that only read (DESCRIBE, SHOW and SUMMARIZE parse as SELECT; an
# EXPLAIN is allowed when the statement it explains is)
READ_ONLY_KINDS = frozenset({"SELECT"})
# DuckDB's home for a query: names no folder of this machine (the home of system users that
# have none), so settings and errors derived from it show nothing of the user's
NO_HOME = "/nonexistent"


class SqlError(Invalid):
    pass


class MemoryExceeded(SqlError):
    """The query needed more memory than its bound."""


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
    when = when.lower()
    found = []
    for ds in ws.datasets():
        if ws.odf_of(ds.id) is OdfVersion.V039:
            found += [(ds.id, b.hash.to_bytes(), b.block.system_time)
                      for b in blocks_named(CurrentDataset(ws, ds.id).state(), when)]
        else:
            found += [(ds.id, h, b.system_time) for h, b in ds.blocks() if h.hex().startswith(when)]
    if not found:
        raise BlockNotFound(f"--as-at {when}: no block of any dataset starts with {when}")
    if len(found) > 1:
        raise SqlError(f"--as-at {when}: matches {len(found)} blocks "
                       f"({', '.join(d for d, _, _ in found)}); give more digits")
    dataset, block, time = found[0]
    return AsAt(time, dataset, block)


@dataclass(frozen=True)
class DatasetRead:
    """A dataset as a read sees it: its slices, oldest first, and its state's key (None when
    it has no primary key), both as at the read's moment."""

    files: list[Path]
    source: DatasetSource | PushSource | None  # None: a current-ODF derivative (no key either)
    key: StateKey | None
    written: tuple[Written, ...] = ()  # a current-ODF dataset's slices, for its state's AS OF


def dataset_reads(ws: Workspace, as_at: AsAt | None = None) -> dict[str, DatasetRead]:
    """Each dataset with data as at ``as_at`` (see ``dataset_read``); datasets without any are
    left out."""
    reads = {}
    for ds in ws.datasets():
        if as_at is not None and as_at.dataset == ds.id:
            read = dataset_read(ds, stop=as_at.block)
        else:
            read = dataset_read(ds, until=as_at.time if as_at is not None else None)
        if read is not None:
            reads[ds.id] = read
    return reads


def dataset_read(ds: Dataset, stop: bytes | None = None, until: datetime | None = None) -> DatasetRead | None:
    """``ds`` up to block ``stop``, or else up to its newest block with system time <= ``until``
    (else its head), its slices checked against their blocks (``checked_slices``); None if it
    had no data then."""
    if ds.ws.odf_of(ds.id) is OdfVersion.V039:
        return current_read(CurrentDataset(ds.ws, ds.id), stop, until)
    reached = stop is None
    blocks, source, vocab = [], None, None
    for h, block in ds.blocks():  # newest first
        reached = reached or h == stop
        if reached and not (until is not None and block.system_time > until):
            source, vocab = source or block.source, vocab or block.vocab
            if block.output_slice is not None:
                blocks.append((h, block))
    if not blocks:
        return None
    assert source is not None, "a chain's first block has a source"
    return DatasetRead(checked_slices(ds, blocks[::-1]), source,
                       state_key(source, vocab or DatasetVocabulary()))


def current_slices(ds: CurrentDataset, stop: bytes | None = None,
                   until: datetime | None = None) -> list[SliceRecord]:
    """A current-ODF dataset's slices, oldest first, up to block ``stop`` (binary multihash) or
    else up to its newest block with system time <= ``until`` (else its head)."""
    slices = ds.state().slices
    if stop is not None:
        at = next((b.block.sequence_number for b in ds.state().blocks if b.hash.to_bytes() == stop), None)
        return [r for r in slices if at is not None and r.sequence_number <= at]
    return [r for r in slices if until is None or r.system_time <= until]


def current_read(ds: CurrentDataset, stop: bytes | None = None,
                 until: datetime | None = None) -> DatasetRead | None:
    """``dataset_read`` of a current-ODF dataset: its slices, checked, and its state key."""
    slices = current_slices(ds, stop, until)
    if not slices:
        return None
    source, key = current_definition(ds)
    watermarks = {b.block.sequence_number: getattr(b.block.event, "new_watermark", None)
                  for b in ds.state().blocks}
    written = tuple(Written(r.slice.offset_interval.end - r.slice.offset_interval.start + 1,
                            watermarks[r.sequence_number]) for r in slices)
    return DatasetRead(checked_current_scan(ds, slices), source, key, written)


def current_definition(ds: CurrentDataset) -> tuple[DatasetSource | PushSource | None, StateKey | None]:
    """A current-ODF root's source in force as the 0.18 model says it (``odf39.adapt``; a
    push-fed root's only push source) and the state key its merge gives (a ledger root's: its
    records carry no retractions, the projection is the same as for 0.18; a snapshot root's:
    by operation type, ``state.py``); (None, None) for a derivative, which has no key, and for
    a root fed by several push sources."""
    from ..data.odf_slice import DEFAULT_VOCABULARY
    from ..metadata.odf39 import events as e
    from ..metadata.odf39.adapt import adapt_snapshot, push_source, vocab_of

    state = ds.state()
    op = (state.vocab.operation_type_column if state.vocab else None) or \
        DEFAULT_VOCABULARY.operation_type
    if state.polling_source is None and len(state.push_sources) == 1:
        pushed = push_source(state.push_sources[0])
        return pushed, state_key(pushed, vocab_of(state.vocab) or DatasetVocabulary(), op)
    if state.polling_source is None:
        return None, None
    adapted = adapt_snapshot(e.DatasetSnapshot(
        name=ds.id, kind=state.kind,
        metadata=[state.polling_source, *([state.vocab] if state.vocab else [])]),
        "0.39").snapshot
    assert adapted.source is not None  # a polling source's
    return adapted.source, state_key(adapted.source, adapted.vocab or DatasetVocabulary(), op)


def slice_files(ws: Workspace, as_at: AsAt | None = None) -> dict[str, list[Path]]:
    """Each dataset's Parquet slices, oldest first (as at ``as_at``), each checked against its
    block (``checked_slices``); datasets without any are left out."""
    return {name: read.files for name, read in dataset_reads(ws, as_at).items()}


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
        runs = _explained_kind(p.query) if kind == "EXPLAIN" else kind
        if runs not in READ_ONLY_KINDS:
            line, column = _line_column(script, offset + len(p.query) - len(p.query.lstrip()))
            inside = " (inside EXPLAIN, which runs it)" if kind == "EXPLAIN" else ""
            raise SqlError(f"line {line}, column {column}: {runs} statements are not allowed{inside}: "
                           "coord sql only reads (SELECT, WITH, VALUES, DESCRIBE, SHOW, EXPLAIN)")
        statements.append(statement)
        offset += len(p.query)
    return statements


def _explained_kind(text: str) -> str:
    """The kind of the statement an ``EXPLAIN [ANALYZE | ANALYSE | (OPTIONS)]`` names;
    ``UNKNOWN``, which is refused, if it cannot be told (``EXPLAIN (SELECT 1)`` is)."""
    import duckdb

    starts = [at for at, token in duckdb.tokenize(text) if token != duckdb.token_type.comment]
    words = [text[a:b].strip() for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    at, depth = 1, 0  # words[0] is EXPLAIN
    while at < len(words) and (depth or words[at] == "(" or words[at].upper() in ("ANALYZE", "ANALYSE")):
        depth += (words[at] == "(") - (words[at] == ")")
        at += 1
    try:
        inner = duckdb.extract_statements(text[starts[at]:]) if at < len(words) else []
    except duckdb.Error:
        return "UNKNOWN"
    if len(inner) != 1:
        return "UNKNOWN"
    kind = inner[0].type.name
    return _explained_kind(inner[0].query) if kind == "EXPLAIN" else kind


class SqlSession:
    """A DuckDB holding the datasets as views, locked down (see the module doc): in its sandbox
    where bubblewrap is at hand (``sandbox``: None, where available; False, in this process).
    ``extra``: more named in-memory tables a query may read (none of them a dataset's id).
    ``reads``: the datasets to hold, by the name a query gives them, instead of every dataset
    as at ``as_at`` (a receipt's inputs, each at its block); ``threads``: DuckDB's threads (one
    gives the same answer every time where parallel work could add floats in another order)."""

    def __init__(self, ws: Workspace, as_at: AsAt | None = None,
                 extra: Mapping[str, pa.Table] | None = None, as_of: datetime | None = None,
                 memory_limit: int | None = None, reads: Mapping[str, DatasetRead] | None = None,
                 threads: int | None = None, sandbox: bool | None = None):
        from . import sandboxed

        self.as_at = as_at
        self.reads = dict(reads) if reads is not None else dataset_reads(ws, as_at)
        self.tables = {name: read.files for name, read in self.reads.items()}
        self.empty = sorted({ds.id for ds in ws.datasets()} - self.tables.keys())
        self._root = str(ws.root)
        config = {
            "autoinstall_known_extensions": False, "autoload_known_extensions": False,
            "temp_directory": "",  # no spill directory: COPY could write into it
            "python_enable_replacements": False,  # FROM a_python_variable would scan it
            "home_directory": NO_HOME, "extension_directory": f"{NO_HOME}/extensions",
            "secret_directory": f"{NO_HOME}/secrets",
            **({"memory_limit": f"{memory_limit >> 20}MiB"} if memory_limit is not None else {}),
            **({"threads": threads} if threads is not None else {}),
        }
        states = tuple((name, f"CREATE TEMP VIEW {quoted(name + STATE_SUFFIX)} AS "
                              f"{state_sql(quoted(name), read.key, as_of, written=read.written)}")
                       for name, read in self.reads.items() if read.key is not None)
        self._bound: list[Path] = []  # the files the sandbox holds, /slices/<n> the n-th
        self._db: SandboxedDuckDB | InProcessDuckDB | None = None
        many = sum(len(read.files) for read in self.reads.values()) > sandboxed.MAX_MOUNTS
        if sandbox is not False and (sandbox or (sandboxed.available() and not many)):
            try:
                self._db = self._sandboxed(config, states, extra or {})
            except sandboxed.SandboxUnavailable:  # no user namespaces here, say
                self._bound = []
        if self._db is None:
            self._db = InProcessDuckDB(config, {name: arrow_dataset(name, read.files, self._root)
                                                for name, read in self.reads.items()},
                                       states, extra or {})

    def _sandboxed(self, config: dict[str, Any], states: tuple[tuple[str, str], ...],
                   extra: Mapping[str, pa.Table]) -> SandboxedDuckDB:
        """The sandbox's DuckDB: each dataset a view over its slices as DuckDB reads them."""
        from .sandboxed import SandboxedDuckDB, Setup, slice_path

        views = []
        for name, read in self.reads.items():
            paths = [slice_path(len(self._bound) + n) for n in range(len(read.files))]
            self._bound += read.files
            views.append((name, f"CREATE TEMP VIEW {quoted(name)} AS SELECT * FROM read_parquet("
                                f"{_list(paths)}, union_by_name = true, hive_partitioning = false)"))
        every = _list([slice_path(n) for n in range(len(self._bound))])
        return SandboxedDuckDB(Setup(
            config, (*LOCKED_DOWN[:2], f"SET allowed_paths = {every}", *LOCKED_DOWN[2:3]),
            (*views, *states), LOCKED_DOWN[3:], tuple(self._bound), tuple(extra.items())))

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def query(self, statement: Statement, script: str) -> pa.Table:
        """Run one checked statement; errors name their place in ``script``. Columns named
        alike get distinct names (``unique_names``)."""
        import pyarrow as pa

        schema, batches = self.batches(statement, script)
        return pa.Table.from_batches(list(batches), schema)

    def batches(self, statement: Statement, script: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """One checked statement's columns (named as by ``query``), and its result batch by
        batch as it is computed."""
        import pyarrow as pa

        from .sandboxed import Failure

        assert self._db is not None
        try:
            given, batches = self._db.reader(statement.text)
        except Failure as e:
            raise self._refusal(e, statement, script) from None
        schema = pa.schema([f.with_name(n) for f, n in zip(given, unique_names(given.names), strict=True)])
        return schema, self._read(batches, schema, statement, script)

    def _read(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema, statement: Statement,
              script: str) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from .sandboxed import Failure

        try:
            for batch in batches:
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        except Failure as e:
            raise self._refusal(e, statement, script) from None

    def run(self, script: str) -> Iterator[pa.Table]:
        """Each statement's result in turn."""
        for statement in split_script(script):
            yield self.query(statement, script)

    def interrupt(self) -> None:
        if self._db is not None:
            self._db.interrupt()

    def _refusal(self, e: Exception, statement: Statement, script: str) -> SqlError:
        """The one-line error for DuckDB's (or Arrow's) failure ``e``."""
        view = getattr(e, "view", None)
        if view is not None:  # the sandbox's setup
            return SqlError(f"dataset {view}: its slices cannot be read ({self._shown(str(e))}); "
                            f"run coord verify {view}")
        if getattr(e, "kind", None) == "OutOfMemoryException":
            assert self._db is not None  # as DuckDB words it ("1.0 GiB")
            return MemoryExceeded(f"the query needed more than {self._db.memory_limit} of memory (DuckDB's "
                                  "memory_limit) and was stopped; ask for less (fewer groups, rows or "
                                  "columns, a LIMIT)")
        return SqlError(self._explain(e, statement, script))

    def _shown(self, message: str) -> str:
        """``message`` with each slice named where the user has it, the workspace's folder
        left out."""
        from .sandboxed import SLICES

        named = re.sub(rf"{SLICES}/(\d+)\b", lambda m: str(self._bound[int(m.group(1))])
                       if int(m.group(1)) < len(self._bound) else m.group(0), message)
        return hide_paths(named, self._root)

    def _explain(self, e: Exception, statement: Statement, script: str) -> str:
        text = self._shown(explain_error(e, script, statement.offset))
        missing = re.search(r'Table with name "?([^"!]+?)"? does not exist', str(e))
        if missing:
            name = missing.group(1)
            dataset = name.removesuffix(STATE_SUFFIX)
            if dataset in self.empty:
                return f"{text} (dataset {dataset} holds no data {self._when()})"
            if dataset != name and dataset in self.reads:
                return no_state(dataset, self.reads[dataset].source)
            named = next((d for d in [*self.tables, *self.state_tables()] if d.endswith(name)), None)
            if named:
                text += f' (a dataset is named with double quotes: FROM "{named}")'
        return text

    def state_tables(self) -> list[str]:
        """The names of the datasets' states (``"<id>@state"``), for those with a key."""
        return [name + STATE_SUFFIX for name, read in self.reads.items() if read.key is not None]

    def _when(self) -> str:
        return self.as_at.describe() if self.as_at else "yet"


# the statements that lock a session's DuckDB down, in order (the sandbox's sets its allowed
# paths, the slices, between the second and the third: they can only be set before)
LOCKED_DOWN = (
    "SET TimeZone = 'UTC'",
    # DuckDB draws a progress bar on stdout when it takes the process for an interactive one
    # (python -c, a notebook), which would mix it into our output
    "SET enable_progress_bar = false",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)


class InProcessDuckDB:
    """A session's DuckDB in this process, the slices handed to it as Arrow datasets (where no
    sandbox can be made): it reaches no file at all."""

    def __init__(self, config: dict[str, Any], tables: Mapping[str, Any],
                 states: tuple[tuple[str, str], ...], extra: Mapping[str, pa.Table]):
        import duckdb

        self._con = con = duckdb.connect(config=config)
        setting = con.execute("SELECT current_setting('memory_limit')").fetchone()
        self.memory_limit = str(setting[0]) if setting else "its limit"
        for statement in LOCKED_DOWN[:2]:
            con.execute(statement)
        for name, table in [*tables.items(), *extra.items()]:
            con.register(name, table)
        for _, view in states:
            con.execute(view)
        for statement in LOCKED_DOWN[2:]:
            con.execute(statement)

    def reader(self, text: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """As ``SandboxedDuckDB.reader``: DuckDB's and Arrow's errors as ``Failure``."""
        import duckdb

        from .duckdb_worker import relation
        from .sandboxed import Failure

        try:
            reader = relation(self._con, text).arrow()
        except (duckdb.Error, OSError) as e:
            raise Failure(str(e), type(e).__name__) from None
        return reader.schema, self._batches(reader)

    @staticmethod
    def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
        import duckdb

        from .sandboxed import Failure

        try:
            yield from reader
        except (duckdb.Error, OSError) as e:
            raise Failure(str(e), type(e).__name__) from None

    def interrupt(self) -> None:
        self._con.interrupt()

    def close(self) -> None:
        self._con.close()


def _list(paths: Sequence[str]) -> str:
    """``paths`` as a DuckDB list of strings (none holds a quote: ``slice_path``'s)."""
    return "[" + ", ".join(f"'{p}'" for p in paths) + "]"


def arrow_dataset(name: str, files: list[Path], root: str, schema_of: Sequence[Path] | None = None) -> Any:
    """The slices as one lazy Arrow dataset, their columns united by name (those of
    ``schema_of``'s slices if given: two versions of a dataset read under one schema); an
    unreadable slice is refused naming the dataset (``root``, the workspace's folder, left out)."""
    import pyarrow as pa
    import pyarrow.dataset as pds
    import pyarrow.parquet as pq

    try:
        schema = pa.unify_schemas([pq.read_schema(f) for f in (files if schema_of is None else schema_of)],
                                  promote_options="permissive")
        return pds.dataset([str(f) for f in files], schema=schema, format="parquet")
    except (OSError, pa.ArrowException) as e:
        raise SqlError(f"dataset {name}: its slices cannot be read ({hide_paths(str(e), root)}); "
                       f"run coord verify {name}") from None


def hide_paths(message: str, root: str) -> str:
    """Arrow names the slice it failed to read; where the workspace is is not the query's
    business (an API client may be asking)."""
    return message.replace(root, "<workspace>")


def unique_names(names: list[str]) -> list[str]:
    """``names`` with each repeat suffixed ``_2``, ``_3``, ... (a name no other column has):
    ``SELECT a.id, b.id`` gives ``id`` and ``id_2``, so no output (a row as a record, JSON)
    loses one of them."""
    given, used, unique = set(names), set(), []
    for name in names:
        new, n = name, 1
        while new in used or (new != name and new in given):
            n += 1
            new = f"{name}_{n}"
        used.add(new)
        unique.append(new)
    return unique


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
