"""What changed in a dataset between two versions (``coord diff``, the API's ``/diff``): the
rows added, removed and changed from version A to version B.

A version is a block of the dataset (named as ``coord log`` names it, or a prefix of that),
or the newest block at or before a system time (``--as-at``'s meaning), optionally read as of
an event time (``--as-of``'s meaning, for a dataset with a state). B defaults to the head; A
to the block before B's newest block that added records (so ``coord diff DS`` is "what the
last change did", even when blocks without data, a watermark say, came after it). A may come
after B: the diff then says what going back would change.

Invariants:
- The rows of a version are the table it describes: a snapshot, ledger or stream-merged
  root's state (``state.py``: one row per primary key, as of the event time given), else the
  rows its change log describes (``row_changes.current_rows``'s rule: appends and correct-tos
  add a row, retractions and correct-froms take one away, a multiset of whole rows). The
  system columns (offset, operation type, system time) and a 0.18 snapshot's observation
  column say how a row arrived, not what it is: they are left out. The event time is kept: a
  whole row includes it (as ``current_rows`` counts it); a row matched by key shows it but
  is not marked changed by it alone (see ``_by_key``).
- When both versions have the same primary key, rows are matched by it: a key only in B is
  added, only in A removed, in both with some column different (nulls equal nulls) changed,
  with the names of the columns that differ. Otherwise (no key, or the key changed between
  the versions) rows are compared whole, as multisets: a row held n more times in B is n
  rows added, n fewer times n rows removed, and nothing is "changed".
- Both versions are read under one schema (their slices' columns united by name, as ``coord
  sql`` does), so a column added between them is null in A.
- It is DuckDB over the checked slices (``sql.dataset_read``), never a loop per row; the
  difference is computed once into a temporary table, its counts and (at most ``limit``)
  rows read from it, in the order added, removed, changed, then by key (or row).
- Rows matched by key, both versions read as of one event time (or both of every record):
  a key's row depends on its own records only, and one version's slices are the first of the
  other's, so only the keys of the records beyond them can differ; both states are projected
  for those keys alone (a 1 % change of a large snapshot ranks 1 % of its records, not all).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Invalid
from ..metadata.timestamps import TimeParseError, format_timestamp, parse_timestamp
from ..store.dataset import CurrentDataset
from ..store.read import DatasetState
from ..workspace import Dataset
from ..workspace.config import OdfVersion
from ..workspace.dataset import BlockNotFound
from .state import NoState, StateKey, no_state, quoted, state_key, state_sql

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from ..data.odf_slice import Vocabulary
    from .sql import DatasetRead

CHANGES = ("added", "removed", "changed")
# helper names of the queries, beside the dataset's own columns (which they must not shadow)
_IN, _SIGN, _SIDE, _N = '"__coord_in"', '"__coord_sign"', '"__coord_side"', '"__coord_n"'


class DiffError(Invalid):
    pass


@dataclass(frozen=True)
class Named:
    """What the front end calls the four arguments, for its refusals."""

    old: str = "--from"
    new: str = "--to"
    old_as_of: str = "--from-as-of"
    new_as_of: str = "--to-as-of"


API_NAMES = Named("from", "to", "from_as_of", "to_as_of")


@dataclass(frozen=True)
class Block:
    """One block of a dataset's chain as a diff names it."""

    name: str  # as ``coord log`` shows it: 0.18 the hash's hex, 0.39 the multihash text
    stop: bytes  # what ``sql.dataset_read`` stops at
    system_time: datetime
    adds_data: bool
    digest_hex: str  # what a prefix may also match (0.39: the digest without the multihash code)


@dataclass(frozen=True)
class Version:
    """A version of the dataset: up to ``block`` (None: before its first block, no rows), read
    as of event time ``as_of`` (None: every record)."""

    block: Block | None
    as_of: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        b = self.block
        return {"block": b.name if b else None,
                "systemTime": format_timestamp(b.system_time) if b else None,
                "asOf": format_timestamp(self.as_of) if self.as_of else None}

    def describe(self) -> str:
        where = f"block {self.block.name[:16]}" if self.block else "before the first block"
        return where + (f" as of {format_timestamp(self.as_of)}" if self.as_of else "")


@dataclass(frozen=True)
class Diff:
    dataset: str
    old: Version
    new: Version
    key: tuple[str, ...] | None  # None: rows compared whole
    counts: dict[str, int]  # each of CHANGES
    rows: pa.Table  # change, key, changed, old, new; at most the limit asked for


def chain(ds: Dataset, current: CurrentDataset | None = None) -> list[Block]:
    """The dataset's blocks, newest first, either ODF version (``current``: a current-ODF
    dataset's, as read already)."""
    if ds.ws.odf_of(ds.id) is OdfVersion.V039:
        from ..store.read import objects_of

        return [Block(str(b.hash), b.hash.to_bytes(), b.block.system_time,
                      objects_of(b.block)[0] is not None, b.hash.digest.hex())
                for b in reversed((current or CurrentDataset(ds.ws, ds.id)).state().blocks)]
    return [Block(h.hex(), h, b.system_time, b.output_slice is not None, h.hex()) for h, b in ds.blocks()]


class _ReadOnce(CurrentDataset):
    """A current-ODF dataset whose chain one diff reads once (each of its steps asks for it)."""

    _state: DatasetState | None = None

    def state(self) -> DatasetState:
        if self._state is None:
            self._state = super().state()
        return self._state


def version_at(blocks: Sequence[Block], dataset: str, when: str | None, option: str) -> int:
    """The index in ``blocks`` (newest first) of the version ``when`` names: a block (hex
    digits, a prefix of its name) or the newest block at or before a system time (RFC 3339),
    ``len(blocks)`` if there was none yet; the head when None."""
    if when is None:
        return 0
    if re.fullmatch(r"[0-9a-fA-F]+", when):
        p = when.lower()
        found = [i for i, b in enumerate(blocks) if b.name.startswith(p) or b.digest_hex.startswith(p)]
        if not found:
            raise BlockNotFound(f"{option} {when}: no block of {dataset} starts with {when} "
                                f"(coord log {dataset} lists them)")
        if len(found) > 1:
            raise DiffError(f"{option} {when}: matches {len(found)} blocks of {dataset}; give more digits")
        return found[0]
    t = _time(when, option, "neither a block (hex digits, as coord log shows them) nor")
    return next((i for i, b in enumerate(blocks) if b.system_time <= t), len(blocks))


def event_time(text: str | None, option: str) -> datetime | None:
    """``text`` as an RFC 3339 time (None if not given), refused naming ``option``."""
    return None if text is None else _time(text, option, "not")


def _time(text: str, option: str, what: str) -> datetime:
    """``what``: the refusal's words before "an RFC 3339 time"."""
    try:
        return parse_timestamp(text)
    except TimeParseError:
        raise DiffError(f"{option} {text}: {what} an RFC 3339 time (e.g. 2024-01-01T00:00:00Z)") from None


def before_last_change(blocks: Sequence[Block], new: int) -> int:
    """The block before the newest block at or before ``blocks[new]`` that added records
    (``len(blocks)``: before the first block); ``new`` itself when none added any."""
    added = next((i for i in range(new, len(blocks)) if blocks[i].adds_data), None)
    return new if added is None else added + 1


def diff(ds: Dataset, old: str | None = None, new: str | None = None, old_as_of: datetime | None = None,
         new_as_of: datetime | None = None, limit: int | None = None, named: Named = Named()) -> Diff:
    """The rows that changed from version ``old`` to ``new`` of ``ds`` (each a block or a
    system time as ``version_at`` takes it, each read as of its event time if given; see the
    module doc for the defaults); ``limit``: rows returned at most (the counts are of all);
    ``named``: the arguments' names in the refusals."""
    current = _ReadOnce(ds.ws, ds.id) if ds.ws.odf_of(ds.id) is OdfVersion.V039 else None
    blocks = chain(ds, current)
    b = version_at(blocks, ds.id, new, named.new)
    a = version_at(blocks, ds.id, old, named.old) if old is not None or old_as_of is not None \
        else before_last_change(blocks, b)
    # A left to its default is B before its last change, so it is read as of B's event time
    a_as_of = old_as_of if old is not None or old_as_of is not None else new_as_of
    versions = [Version(blocks[i] if i < len(blocks) else None, as_of)
                for i, as_of in ((a, a_as_of), (b, new_as_of))]
    reads = [_read(ds, current, v) for v in versions]
    keys = [r.key if r is not None else _definition(ds, current)[1] for r in reads]
    for given, k, option in ((old_as_of, keys[0], named.old_as_of), (new_as_of, keys[1], named.new_as_of),
                             (a_as_of, keys[0], named.new_as_of)):
        if given is not None and k is None:
            raise NoState(f"{option}: {no_state(ds.id, _definition(ds, current)[0])}")
    if reads[0] is None and reads[1] is None:  # no data in either: nothing to compare
        return Diff(ds.id, versions[0], versions[1], keys[1].key if keys[1] is not None else None,
                    dict.fromkeys(CHANGES, 0), _no_rows())
    key = keys[1] if keys[0] is not None and keys[1] is not None and keys[0].key == keys[1].key else None
    with _connection() as con:
        columns = _register(con, ds, reads)
        # matched by key, read as of one time: only keys with records in one version's slices
        # beyond the other's can differ
        touched = "x_log" if key is not None and a_as_of == new_as_of and _register_beyond(con, ds, reads) \
            else None
        sides = [_rows_sql(f"{side}_log", k, v.as_of, read, current, touched)
                 for side, k, v, read in zip("ab", keys, versions, reads, strict=True)]
        data = _data_columns(columns, ds, current, keys)
        query = _by_key(sides, key.key, key.event_time, data) if key is not None else _whole_rows(sides, data)
        con.execute(f"CREATE TEMP TABLE diff AS {query}")
        counted = dict(con.execute("SELECT change, count(*) FROM diff GROUP BY change").fetchall())
        bound = "" if limit is None else f" LIMIT {int(limit)}"
        rows = con.sql(f"SELECT * FROM diff{bound}").to_arrow_table()
    return Diff(ds.id, versions[0], versions[1], key.key if key is not None else None,
                {c: int(counted.get(c, 0)) for c in CHANGES}, rows)


def _no_rows() -> pa.Table:
    import pyarrow as pa

    return pa.table({"change": pa.array([], pa.string()), "key": pa.array([], pa.null()),
                     "changed": pa.array([], pa.list_(pa.string())),
                     "old": pa.array([], pa.null()), "new": pa.array([], pa.null())})


def _read(ds: Dataset, current: CurrentDataset | None, version: Version) -> DatasetRead | None:
    """``version``'s read (``current``: the dataset if it is a current-ODF one)."""
    from .sql import current_read, dataset_read

    if version.block is None:
        return None
    stop = version.block.stop
    return dataset_read(ds, stop=stop) if current is None else current_read(current, stop)


def _definition(ds: Dataset, current: CurrentDataset | None) -> tuple[Any, StateKey | None]:
    """The dataset's source in force now and the key it gives (a version without data has no
    read to tell its key)."""
    if current is not None:
        from .sql import current_definition

        return current_definition(current)
    state = ds.state()
    return state.source, state_key(state.source, state.vocab)


def _connection() -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(config={"temp_directory": ""})  # no spill folder in the current one
    con.execute("SET TimeZone = 'UTC'")
    return con


def _register(con: duckdb.DuckDBPyConnection, ds: Dataset, reads: list[DatasetRead | None]) -> list[str]:
    """Both versions' change logs as ``a_log`` and ``b_log``, under one schema; its columns."""
    files = [r.files if r is not None else [] for r in reads]
    both = list(dict.fromkeys([*files[0], *files[1]]))
    native = _one_schema(con, both)
    for side, mine in zip("ab", files, strict=True):
        _log(con, f"{side}_log", ds, mine, both, native)
    return list(con.sql("SELECT * FROM b_log").columns)


def _register_beyond(con: duckdb.DuckDBPyConnection, ds: Dataset, reads: list[DatasetRead | None]) -> bool:
    """The slices one version has beyond the other's as ``x_log``, when the other's are the
    first of its own (two blocks of one chain); whether it was."""
    shorter, longer = sorted((r.files if r is not None else [] for r in reads), key=len)
    if not shorter or longer[:len(shorter)] != shorter:  # nothing to leave out, or not a prefix
        return False
    _log(con, "x_log", ds, longer[len(shorter):], longer, _one_schema(con, longer))
    return True


def _one_schema(con: duckdb.DuckDBPyConnection, files: list[Path]) -> bool:
    """Whether every file has the same columns, of the same types (most datasets' slices)."""
    listed = _listed(files)
    [(n,)] = con.execute(
        "SELECT count(DISTINCT columns) FROM (SELECT list((name, type, logical_type::VARCHAR)) AS columns "
        f"FROM parquet_schema({listed}) GROUP BY file_name)").fetchall()
    return n <= 1


def _log(con: duckdb.DuckDBPyConnection, name: str, ds: Dataset, files: list[Path], schema_of: list[Path],
         native: bool) -> None:
    """``files`` as the relation ``name`` with the columns of ``schema_of``'s: DuckDB's own
    Parquet reader where they all have one schema (it reads in parallel, in order), else an
    Arrow dataset uniting them by name."""
    if not native:
        from .sql import arrow_dataset

        con.register(name, arrow_dataset(ds.id, files, str(ds.ws.root), schema_of=schema_of))
        return
    rows = f"read_parquet({_listed(files)})" if files else f"read_parquet({_listed(schema_of[:1])}) LIMIT 0"
    con.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM {rows}")


def _listed(files: list[Path]) -> str:
    return "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"


def _vocabulary(current: CurrentDataset) -> Vocabulary:
    """A current-ODF dataset's system columns' names (its ``SetVocab``, else the defaults)."""
    from ..data.odf_slice import DEFAULT_VOCABULARY as V
    from ..data.odf_slice import Vocabulary

    v = current.state().vocab
    if v is None:
        return V
    return Vocabulary(v.offset_column or V.offset, v.operation_type_column or V.operation_type,
                      v.system_time_column or V.system_time, v.event_time_column or V.event_time)


def _system_columns(ds: Dataset, current: CurrentDataset | None) -> set[str]:
    """How a row arrived, not what it is: the offset, operation type and system time."""
    if current is not None:
        v = _vocabulary(current)
        return {v.offset, v.operation_type, v.system_time}
    return {ds.state().vocab.system_time}


def _data_columns(columns: list[str], ds: Dataset, current: CurrentDataset | None,
                  keys: list[StateKey | None]) -> list[str]:
    hidden = _system_columns(ds, current) | {k.observation for k in keys if k is not None and k.observation}
    return [c for c in columns if c not in hidden]


def _rows_sql(log: str, key: StateKey | None, as_of: datetime | None, read: DatasetRead | None,
              current: CurrentDataset | None, touched: str | None = None) -> str:
    """The rows a version describes, every column kept, each with its sign: +1 adds a row,
    -1 takes one away (its state's rows, else its change log's records); ``current``: the
    dataset if it is a current-ODF one; ``touched``: a relation of the only keys whose rows
    are wanted."""
    if key is not None:
        rows = state_sql(log, key, as_of, written=read.written if read is not None else (), keys_of=touched)
        return f"SELECT *, 1 AS {_SIGN} FROM ({rows})"
    if current is None:  # 0.18: records are only ever added
        return f"SELECT *, 1 AS {_SIGN} FROM {log}"
    from ..data.row_changes import sign_sql

    return f"SELECT *, {sign_sql(quoted(_vocabulary(current).operation_type))} AS {_SIGN} FROM {log}"


def _pack(alias: str, columns: list[str]) -> str:
    return "struct_pack(" + ", ".join(f"{quoted(c)} := {alias}.{quoted(c)}" for c in columns) + ")"


def _order(change: str) -> str:
    """Added, removed, changed: the order of the counts."""
    return f"CASE {change} " + " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(CHANGES)) + " END"


def _by_key(sides: list[str], key: tuple[str, ...], event_time: str, data: list[str]) -> str:
    """Rows matched by ``key``: a key on one side only is added or removed, on both with a
    column different is changed (``changed``: the names of those columns). The event time is
    shown, not compared: a state's row carries the time its version took effect, which moves
    with every change of the row, so it would be marked on every changed row."""
    values = [c for c in data if c not in key and c != event_time]
    match = " AND ".join(f"a.{quoted(k)} IS NOT DISTINCT FROM b.{quoted(k)}" for k in key)
    differs = [f"a.{quoted(c)} IS DISTINCT FROM b.{quoted(c)}" for c in values]
    names = ", ".join(f"CASE WHEN {d} THEN '{c.replace(chr(39), chr(39) * 2)}' END"
                      for c, d in zip(values, differs, strict=True))
    changed = f"list_filter([{names}], lambda x: x IS NOT NULL)" if values else "[]::VARCHAR[]"
    change = f"CASE WHEN a.{_IN} IS NULL THEN 'added' WHEN b.{_IN} IS NULL THEN 'removed' ELSE 'changed' END"
    key_pack = "struct_pack(" + ", ".join(
        f"{quoted(k)} := coalesce(b.{quoted(k)}, a.{quoted(k)})" for k in key) + ")"
    return (f"SELECT {change} AS change, {key_pack} AS key, "
            f"CASE WHEN a.{_IN} AND b.{_IN} THEN {changed} END AS changed, "
            f"CASE WHEN a.{_IN} THEN {_pack('a', data)} END AS old, "
            f"CASE WHEN b.{_IN} THEN {_pack('b', data)} END AS new "
            f"FROM (SELECT *, true AS {_IN} FROM ({sides[0]})) a "
            f"FULL JOIN (SELECT *, true AS {_IN} FROM ({sides[1]})) b ON {match} "
            f"WHERE a.{_IN} IS NULL OR b.{_IN} IS NULL"
            + "".join(f" OR {d}" for d in differs)
            + f" ORDER BY {_order(change)}, "
            + ", ".join(f"coalesce(b.{quoted(k)}, a.{quoted(k)})" for k in key))


def _whole_rows(sides: list[str], data: list[str]) -> str:
    """Rows compared whole, as multisets: each side's count of a row is the sum of its
    records' signs (a state's rows count once), never below zero, and a row held n more (or
    fewer) times in B is n rows added (removed)."""
    cols = ", ".join(map(quoted, data))
    held = [f"greatest(coalesce(sum({_SIGN}) FILTER (WHERE {_SIDE} = {i}), 0), 0)" for i in (0, 1)]
    counted = (f"SELECT {cols}, ({held[1]} - {held[0]})::BIGINT AS {_N} FROM ("
               f"SELECT {cols}, {_SIGN}, 0 AS {_SIDE} FROM ({sides[0]}) UNION ALL "
               f"SELECT {cols}, {_SIGN}, 1 AS {_SIDE} FROM ({sides[1]})) "
               f"GROUP BY {cols} HAVING {_N} <> 0")
    change = f"CASE WHEN {_N} > 0 THEN 'added' ELSE 'removed' END"
    return (f"SELECT {change} AS change, NULL AS key, NULL::VARCHAR[] AS changed, "
            f"CASE WHEN {_N} < 0 THEN {_pack('r', data)} END AS old, "
            f"CASE WHEN {_N} > 0 THEN {_pack('r', data)} END AS new "
            f"FROM (SELECT *, unnest(range(abs({_N}))) FROM ({counted})) r "
            f"ORDER BY {_order(change)}, {', '.join(f'r.{quoted(c)}' for c in data)}")


def counts_line(d: Diff) -> str:
    """``3 added, 1 removed, 2 changed``."""
    return ", ".join(f"{d.counts[c]} {c}" for c in CHANGES)


def document(d: Diff, max_rows: int | None = None, max_bytes: int | None = None) -> bytes:
    """The diff as one JSON document, counts first, its rows cut at ``max_rows`` or before
    their JSON passes ``max_bytes`` (``truncatedBy`` says which): the CLI's ``-o json`` and
    the API's answer."""
    from .bounded import json_rows

    rows, truncated_by = json_rows([d.rows], max_rows, max_bytes)
    if truncated_by is None and d.rows.num_rows < sum(d.counts.values()):
        truncated_by = "limit"  # the rows were already cut where they were read
    head = json.dumps({"dataset": d.dataset, **d.counts, "from": d.old.as_json(), "to": d.new.as_json(),
                       "key": list(d.key) if d.key is not None else None})[:-1]
    tail = json.dumps({"truncated": truncated_by is not None, "truncatedBy": truncated_by})[1:]
    return f'{head}, "rows": [{", ".join(rows)}], {tail}'.encode()


def flat(d: Diff) -> pa.Table:
    """The rows as flat columns (for CSV): change, changed, then ``old.C`` and ``new.C`` for
    each column C."""
    import pyarrow as pa

    rows = d.rows
    columns: list[Any] = [rows["change"], rows["changed"]]
    names = ["change", "changed"]
    for side in ("old", "new"):
        packed = rows[side].combine_chunks() if rows.num_rows else None
        kind = rows.schema.field(side).type
        if not pa.types.is_struct(kind):
            continue
        for i in range(kind.num_fields):
            field = kind.field(i)
            names.append(f"{side}.{field.name}")
            columns.append(packed.field(i) if packed is not None and packed.null_count == 0 else
                           _field_or_null(packed, i, field.type, rows.num_rows))
    return pa.table(columns, names=names)


def _field_or_null(packed: Any, i: int, kind: pa.DataType, n: int) -> Any:
    """Field ``i`` of a struct column, null where the struct is (``StructArray.field`` ignores
    the struct's own validity)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if packed is None:
        return pa.nulls(n, kind)
    return pc.if_else(pc.is_valid(packed), packed.field(i), pa.scalar(None, kind))
