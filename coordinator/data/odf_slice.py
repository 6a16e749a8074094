"""The stored table of a current-ODF (0.39) data slice, as the reference writes it, and the
Parquet file it is written to (layout: ``schemas/ODF-039-DATA.md``).

Invariants of a table ``build_slice`` returns:

- Columns, in this order: the offset (Int64), the operation type (Int32: ``Op``), the system
  time (Timestamp(ms, "UTC"), one value for the whole slice), the event time (Timestamp(ms,
  "UTC") or Date32), all four not null; then the data columns in the order given. Names come
  from the dataset's ``Vocabulary``.
- Rows are in the canonical order of ``odf_order`` (led by the primary key given, for a root
  merged by key, as the reference orders it) and the offsets count up by one from
  ``prev_offset + 1`` (0 for a dataset's first slice) in that order; a correct-from row is
  immediately followed by its correct-to row.
- Every type is one that pyarrow and arrow-rs read back from the written file as the same Arrow
  type with the same values, and that arrow-digest V0 can hash: dictionaries are decoded, the
  top-level timestamps are milliseconds in "UTC" (the reference's normalisation), Date64 is
  Date32, second-unit timestamps and times nested deeper are milliseconds, view types are
  their plain forms, list items are named ``element``. What has no such form is refused with
  ``SliceLayoutError`` naming the column, before anything is written.
- ``slice_hashes`` hashes a written file as the reference would: the rows as arrow-rs reads
  them (``parquet_arrow_rs``), every column in stored order.
"""
from __future__ import annotations

import enum
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CoordError, Invalid
from ..metadata.multiformats import ARROW0_SHA3_256, SHA3_256, Multihash
from ..metadata.odf39.events import OffsetInterval
from ..workspace.fsutil import physical_hash
from . import PARALLEL_ROWS, THREADS, arrow_of, parquet_reader, validity
from .arrow_digest import RecordDigest, file_digest
from .odf_order import canonical_order
from .parquet_arrow_rs import arrow_rs_schema

__all__ = ["DEFAULT_VOCABULARY", "Op", "SliceFileError", "SliceHashes",
           "SliceLayoutError", "Vocabulary", "build_slice", "slice_hashes", "stored_type",
           "write_slice"]

MS_UTC = pa.timestamp("ms", tz="UTC")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SliceLayoutError(Invalid):
    """Data that cannot be stored as a current-ODF slice (a type, a column, an operation)."""


class SliceFileError(CoordError):
    """A slice's data file is not as a slice must be."""


class Op(enum.IntEnum):
    """The operation type of a record (ODF "Representation of Retractions and Corrections")."""

    APPEND = 0
    RETRACT = 1
    CORRECT_FROM = 2  # always immediately followed by its CORRECT_TO
    CORRECT_TO = 3


@dataclass(frozen=True)
class Vocabulary:
    """The names of a dataset's system columns (ODF ``SetVocab``; these are its defaults)."""

    offset: str = "offset"
    operation_type: str = "op"
    system_time: str = "system_time"
    event_time: str = "event_time"


DEFAULT_VOCABULARY = Vocabulary()

# Arrow types the reference's hash (arrow-digest V0) has no encoding for, or which Parquet
# cannot carry back as themselves: refused wherever they occur in a column.
_REFUSED = {
    "duration": pa.types.is_duration, "interval": pa.types.is_interval, "map": pa.types.is_map,
    "union": pa.types.is_union, "null": pa.types.is_null,
    "list view": lambda t: pa.types.is_list_view(t) or pa.types.is_large_list_view(t),
    "run-end encoded": pa.types.is_run_end_encoded,
}


def build_slice(data: pa.Table, *, system_time: datetime, prev_offset: int | None,
                vocabulary: Vocabulary = DEFAULT_VOCABULARY,
                fallback_event_time: datetime | None = None,
                key: Sequence[str] = ()) -> pa.Table:
    """The stored table of the slice that adds ``data`` at ``system_time``.

    ``data`` holds the event time column and the data columns, and may hold the operation type
    column (every row an append if not). A missing event time, or a null one, is
    ``fallback_event_time`` (the reference's source event time) when given, else refused.
    ``key``: the primary key of a root merged by key (snapshot, changelog or upsert stream),
    which orders the records first, then their operation type, as the reference's merge does.
    """
    v = vocabulary
    for name in (v.offset, v.system_time):
        if name in data.column_names:
            raise SliceLayoutError(f"column {name!r} is a system column of the dataset; rename "
                                   "it in the data (or choose another name in its vocabulary)")
    if system_time.tzinfo is None:
        raise SliceLayoutError(f"system time {system_time} has no time zone; give it in UTC")
    data = _with_event_time(data, v.event_time, fallback_event_time)
    ops = _operation_types(data, v.operation_type)
    columns = [c for c in data.column_names if c not in (v.event_time, v.operation_type)]
    schema = pa.schema(
        [pa.field(v.event_time, stored_type(data.schema.field(v.event_time).type,
                                            v.event_time, top_level=True), nullable=False)]
        + [data.schema.field(c).with_type(stored_type(data.schema.field(c).type, c,
                                                      top_level=True)) for c in columns])
    table = pa.Table.from_arrays([data[v.event_time], *(data[c] for c in columns)],
                                 names=[v.event_time, *columns]).cast(schema, safe=False)
    table = pa.Table.from_arrays(_columnwise(table, pa.ChunkedArray.combine_chunks),
                                 schema=table.schema)
    for name in columns:
        _refuse_hidden_struct_nulls(table[name], name)
    ordered = canonical_order(table, ops, v.event_time, key)
    n = table.num_rows
    start = 0 if prev_offset is None else prev_offset + 1
    system = [
        pa.field(v.offset, pa.int64(), nullable=False),
        pa.field(v.operation_type, pa.int32(), nullable=False),
        pa.field(v.system_time, MS_UTC, nullable=False),
    ]
    head = [arrow_of(np.arange(start, start + n, dtype=np.int64)),
            arrow_of(ops[ordered]),
            _instants(system_time, n)]
    in_order = not n or (ordered[0] == 0 and bool((np.diff(ordered) == 1).all()))
    rows = arrow_of(ordered)
    body = table.columns if in_order else _columnwise(table, lambda column: column.take(rows))
    return pa.Table.from_arrays(head + body, schema=pa.schema(system + list(table.schema)))


def _columnwise(table: pa.Table, fn: Callable[[pa.ChunkedArray], Any]) -> list[Any]:
    """``fn`` of each of the table's columns, in parallel threads from ``PARALLEL_ROWS`` rows
    on (Arrow's ``take`` and ``combine_chunks`` release the GIL; a table's own go column by
    column: combining a 2 M-row slice's 16 chunks took 150 ms so, 38 ms in two threads)."""
    if table.num_rows < PARALLEL_ROWS:
        return [fn(column) for column in table.columns]
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(fn, table.columns))


def _with_event_time(data: pa.Table, name: str, fallback: datetime | None) -> pa.Table:
    """``data`` with its event time column present, of an event time type, without nulls."""
    if name not in data.column_names:
        if fallback is None:
            raise SliceLayoutError(f"the data has no event time column {name!r}; add it, or "
                                   "give the source's event time as the fallback")
        return data.append_column(name, _fallback_array(fallback, MS_UTC, data.num_rows))
    t = data.schema.field(name).type
    if not (pa.types.is_timestamp(t) or pa.types.is_date(t)):
        raise SliceLayoutError(f"event time column {name!r} is {t}; it must be a date or a "
                               "timestamp")
    column = data[name]
    if column.null_count:
        if fallback is None:
            raise SliceLayoutError(f"event time column {name!r} has {column.null_count} nulls; "
                                   "fill them, or give the source's event time as the fallback")
        filled = pc.coalesce(column, _fallback_array(fallback, t, 1)[0])
        data = data.set_column(data.schema.get_field_index(name), name, filled)
    return data


def _instants(when: datetime, n: int) -> pa.Array:
    """``n`` times ``when`` as Timestamp(ms, "UTC") (milliseconds floored, as chrono's)."""
    millis = (when - _EPOCH) // timedelta(milliseconds=1)
    return arrow_of(np.full(n, millis, np.int64)).view(MS_UTC)


def _fallback_array(when: datetime, t: pa.DataType, n: int) -> pa.Array:
    ms = _instants(when, n)
    if pa.types.is_timestamp(t):
        return ms.cast(t, safe=False)
    return ms.cast(pa.timestamp("ms")).cast(t, safe=False)  # the UTC date of that instant


def _operation_types(data: pa.Table, name: str) -> np.ndarray:
    """The rows' operation types (Int32), checked: known values, each correct-from row
    immediately followed by a correct-to row and each correct-to row preceded by one."""
    if name not in data.column_names:
        return np.zeros(data.num_rows, np.int32)
    column = data[name]
    if not pa.types.is_integer(column.type) or column.null_count:
        raise SliceLayoutError(f"operation type column {name!r} must be integers without "
                               f"nulls ({OPERATION_TYPES})")
    ops = column.to_numpy().astype(np.int32)
    problem = operation_type_problem(ops)
    if problem is not None:
        raise SliceLayoutError(f"operation type column {name!r}, row {problem[0]}: {problem[1]}")
    return ops


OPERATION_TYPES = "0 append, 1 retract, 2 correct-from, 3 correct-to"


def operation_type_problem(ops: np.ndarray, paired: bool = True) -> tuple[int, str] | None:
    """The first row (from 0) of ``ops`` that is no operation type, or (``paired``) a
    correct-from not immediately followed by a correct-to or a correct-to not preceded by
    one, and why; None if there is none."""
    unknown = np.flatnonzero((ops < Op.APPEND) | (ops > Op.CORRECT_TO))
    if len(unknown):
        return int(unknown[0]), f"{int(ops[unknown[0]])} is no operation type ({OPERATION_TYPES})"
    if not paired:
        return None
    after = np.append(ops[1:], -1)
    before = np.insert(ops[:-1], 0, -1)
    unpaired = ((ops == Op.CORRECT_FROM) & (after != Op.CORRECT_TO)) | (
        (ops == Op.CORRECT_TO) & (before != Op.CORRECT_FROM))
    if unpaired.any():
        return int(np.flatnonzero(unpaired)[0]), ("a correct-from row must be immediately "
                                                  "followed by its correct-to row")
    return None


def stored_type(t: pa.DataType, column: str, top_level: bool = False) -> pa.DataType:
    """The type a column of type ``t`` is stored as (see the module's invariants)."""
    for what, refused in _REFUSED.items():
        if refused(t):
            raise SliceLayoutError(
                f"column {column!r}: {what} type {t} cannot be stored in an ODF slice (the "
                "reference's logical hash has no encoding for it); cast it to a supported type")
    if isinstance(t, pa.BaseExtensionType):
        return t  # stored and hashed as its storage
    if pa.types.is_decimal(t) and not 0 <= t.scale <= t.precision:
        raise SliceLayoutError(f"column {column!r}: Parquet cannot store {t} (a decimal's "
                               "scale must lie in 0..precision); cast it to such a decimal")
    if pa.types.is_dictionary(t):
        return stored_type(t.value_type, column, top_level)
    if pa.types.is_timestamp(t):
        if top_level:
            return MS_UTC
        return pa.timestamp("ms", t.tz) if t.unit == "s" else t
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_time32(t) and t.unit == "s":
        return pa.time32("ms")
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(stored_type(f.type, f"{column}.{f.name}")) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = t.value_field
        if _holds_struct(item.type):
            raise SliceLayoutError(f"column {column!r}: a list of structs ({t}) cannot be "
                                   "stored in an ODF slice (the reference's logical hash has no "
                                   "encoding for it); store the struct's fields as lists")
        # Named as Parquet names list items, so that pyarrow reads back the same type.
        item = pa.field("element", stored_type(item.type, f"{column}[]"), item.nullable)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(item, t.list_size)
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    return t


def _holds_struct(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _holds_struct(t.value_type)
    if pa.types.is_struct(t):
        return True
    return (pa.types.is_list(t) or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)) and _holds_struct(t.value_type)


def _refuse_hidden_struct_nulls(column: pa.ChunkedArray, name: str) -> None:
    """Refuse a struct column where arrow-digest V0 would hash a null as a value.

    As read back from Parquet, a null struct row is null in all its fields. The reference's
    hash then counts a field's value as null only where the uppermost struct level that has
    nulls (in the batch) is null: a field's own null in a row where that struct is not null is
    hashed from whatever the reader left in its buffer (arrow-rs: a stale value). So below the
    first struct level with nulls, every null must be a null of that level.
    """
    if not pa.types.is_struct(column.type) or not column.num_chunks:
        return
    _check_struct(column.chunk(0), name, parent=None, anchor=None)


def _check_struct(arr: pa.Array, name: str, parent: np.ndarray | None,
                  anchor: np.ndarray | None) -> None:
    valid = validity(arr)
    effective = valid if parent is None else parent & valid
    if anchor is not None and not np.array_equal(effective, anchor):
        raise SliceLayoutError(
            f"column {name!r}: null where an enclosing struct is not null, in a struct column "
            "that also has null rows (the reference's logical hash would hash that null as a "
            "value); make the struct not null, or null the whole struct row instead")
    if anchor is None and not effective.all():
        anchor = effective
    if pa.types.is_struct(arr.type):
        for i, field in enumerate(arr.type):
            _check_struct(arr.field(i), f"{name}.{field.name}", effective, anchor)


# --- Writing --------------------------------------------------------------------------------

# The reference's writer (kamu-cli src/infra/ingest-datafusion writer.rs, get_write_properties,
# over DataFusion 54's ParquetOptions defaults) in pyarrow's terms. Format 2.6 carries the
# logical types arrow-rs writes (nanosecond timestamps, unsigned integers); data pages are
# version 1 (arrow-rs WriterVersion::PARQUET_1_0).
PARQUET_OPTIONS = {
    "compression": "snappy",
    "version": "2.6",
    "data_page_version": "1.0",
    "row_group_size": 1024 * 1024,
    "data_page_size": 1024 * 1024,
    "dictionary_pagesize_limit": 1024 * 1024,
    "write_batch_size": 1024,
    "use_dictionary": True,
    "write_statistics": True,
    "write_page_index": True,
    "store_schema": True,
}


# --- Hashes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceHashes:
    """What a block records of a slice's file: its hashes as multihashes, offsets and size."""

    logical: Multihash  # arrow0-sha3-256 of the rows as arrow-rs reads them
    physical: Multihash  # sha3-256 of the file's bytes
    offsets: OffsetInterval | None  # None for a file without rows
    num_records: int
    size: int


def slice_hashes(path: str | os.PathLike, vocabulary: Vocabulary = DEFAULT_VOCABULARY,
                 *, physical: Multihash | None = None) -> SliceHashes:
    """The hashes, offsets and size of a slice's Parquet file.

    The logical hash is of every column in stored order, read batch by batch (columns in
    parallel) with the types arrow-rs gives them (``parquet_arrow_rs``); the physical hash
    is computed from the file's bytes at the same time, unless the caller gives it (a
    verifier hashes the bytes first, before the file is parsed). The offsets come from the
    offset column's statistics (read from the column when a row group has none) and must span
    exactly one offset per record. The operation types must be the standard's, each
    correct-from record directly followed by its correct-to (``_operation_types``).
    """
    f = parquet_reader(path)
    with ThreadPoolExecutor(1) as pool:
        bytes_hash = pool.submit(lambda: physical or Multihash(SHA3_256, physical_hash(path)))
        logical = file_digest(path, read_as=arrow_rs_schema(f))
        offsets = _offset_interval(f, vocabulary.offset, path)
        if vocabulary.operation_type in f.schema_arrow.names:
            try:
                _operation_types(f.read(columns=[vocabulary.operation_type]),
                                 vocabulary.operation_type)
            except SliceLayoutError as e:
                raise SliceFileError(f"data file {path}: {e}") from None
        return SliceHashes(logical=Multihash(ARROW0_SHA3_256, logical),
                           physical=bytes_hash.result(),
                           offsets=offsets, num_records=f.metadata.num_rows,
                           size=os.path.getsize(path))


def slice_offsets(path: str | os.PathLike,
                  vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> OffsetInterval | None:
    """The offsets a slice's file holds, from its footer's statistics (see ``slice_hashes``)."""
    return _offset_interval(parquet_reader(path), vocabulary.offset, path)


def _offset_interval(f: pq.ParquetFile, name: str,
                     path: str | os.PathLike) -> OffsetInterval | None:
    rows = f.metadata.num_rows
    if not rows:
        return None
    try:
        index = next(i for i in range(len(f.schema)) if f.schema.column(i).path == name)
    except StopIteration:
        raise SliceFileError(f"data file {path}: no offset column {name!r}; it is not a "
                             "current-ODF slice") from None
    if f.schema_arrow.field(name).type != pa.int64():
        raise SliceFileError(f"data file {path}: offset column {name!r} is "
                             f"{f.schema_arrow.field(name).type}, not int64")
    stats = [f.metadata.row_group(g).column(index).statistics
             for g in range(f.metadata.num_row_groups)]
    if all(s is not None and s.has_min_max and not s.null_count for s in stats):
        start, end = min(s.min for s in stats), max(s.max for s in stats)
    else:
        column = f.read(columns=[name])[name]
        if column.null_count:
            raise SliceFileError(f"data file {path}: offset column {name!r} has nulls")
        bounds = pc.min_max(column)
        start, end = bounds["min"].as_py(), bounds["max"].as_py()
    if end - start + 1 != rows:
        raise SliceFileError(f"data file {path}: offsets {start} to {end} for {rows} records; "
                             "a slice holds one offset per record, consecutive")
    return OffsetInterval(start=int(start), end=int(end))


def write_slice(table: pa.Table, path: str | os.PathLike,
                vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> SliceHashes:
    """Write a table ``build_slice`` made to ``path`` as the reference writes slices, and
    return what ``slice_hashes`` would of the file, computed while it is written.

    The logical hash is of the table itself, hashed in parallel threads while pyarrow writes
    it: a slice's stored types are those both readers read back as themselves, with the same
    values, so the table is the file as read back (tests/data/test_odf_slice.py checks this
    against ``slice_hashes`` on generated slices). The physical hash is of the written bytes.
    """
    with ThreadPoolExecutor(1) as driver, ThreadPoolExecutor(os.cpu_count()) as pool:
        digest = RecordDigest(table.schema, pool)
        hashed = driver.submit(digest.update, table)
        pq.write_table(table, path, **PARQUET_OPTIONS)
        hashed.result()
    n = table.num_rows
    offsets = table[vocabulary.offset]
    return SliceHashes(
        logical=Multihash(ARROW0_SHA3_256, digest.finish()),
        physical=Multihash(SHA3_256, physical_hash(path)),
        offsets=OffsetInterval(start=offsets[0].as_py(), end=offsets[n - 1].as_py()) if n else None,
        num_records=n, size=os.path.getsize(path))
