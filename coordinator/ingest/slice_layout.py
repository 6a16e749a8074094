"""The output slice: event time column, schema continuity, system time, row order, Parquet.

Layout (docs/architecture.md, Data slices): ``system_time`` TIMESTAMP(6) UTC first, then the event time column
(timestamp[us, UTC] or date, never null), then the data columns; rows ordered by event time.
"""
from __future__ import annotations

import os
from datetime import date, datetime, time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..data.odf_schema import arrow_columns
from ..data.slices import compare_schemas
from ..metadata.objects import DatasetVocabulary
from ..metadata.schema_evolution import added_columns
from ..metadata.timestamps import UTC
from ..workspace.fsutil import physical_hash
from .convert import ConversionError, TextOptions, convert_column
from .errors import IngestError

TIMESTAMP = pa.timestamp("us", tz="UTC")


def with_event_time(table: pa.Table, vocab: DatasetVocabulary, default: datetime,
                    name: str, rows_before: int = 0) -> pa.Table:
    """Give the table its event time column: the data's own, or ``default`` for every row.

    ``default`` is the event time the fetch step found (file or path), else the system time.
    ``rows_before``: the file's records before this table (a piece of it), for messages.
    """
    if vocab.system_time in table.column_names:
        raise IngestError(f"{name}: the data has a column {vocab.system_time!r}, which is the "
                          "system time column every slice gets; rename it (preprocess)")
    column = vocab.event_time
    if column not in table.column_names:
        return table.add_column(0, column, pa.repeat(pa.scalar(default, TIMESTAMP), len(table)))
    values = _as_event_time(table.column(column), column, name, rows_before)
    if values.null_count:
        row = pc.index(pc.is_null(values), True).as_py()
        raise IngestError(f"{name}: row {rows_before + row + 1}: event time column {column!r} is null "
                          "(every record needs an event time)")
    return table.set_column(table.column_names.index(column), column, values)


def _as_event_time(col: pa.ChunkedArray, column: str, name: str, rows_before: int) -> pa.ChunkedArray:
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            return convert_column(column, col, TIMESTAMP, TextOptions())
        except ConversionError as e:
            raise IngestError(f"{name}: {e.shifted(rows_before)}; the event time column must hold "
                              "timestamps") from None
    if pa.types.is_timestamp(t):
        return col.cast(pa.timestamp(t.unit, tz=t.tz or "UTC")).cast(TIMESTAMP)
    if pa.types.is_date(t):
        return col.cast(pa.date32())
    raise IngestError(f"{name}: event time column {column!r} has type {t}; "
                      "expected a timestamp or a date")


def conform(table: pa.Table, previous: pa.Schema | None, vocab: DatasetVocabulary,
            dataset: str, files: str) -> pa.Table:
    """Keep the earlier slices' columns and types (converting a changed type when the values
    allow); new columns come at the end. Whether the schema may change so is
    ``schema_evolution.added_columns``' to decide: a column missing, or whose values do not
    convert to its earlier type, is refused, naming the ``files`` the records came from."""
    if previous is None:
        return table
    change = compare_schemas(previous, table.schema, vocab.system_time)
    columns = {f.name: table.column(f.name) for f in change.kept if f.name not in change.dropped}
    for f, _ in change.retyped:
        try:
            columns[f.name] = columns[f.name].cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # its values do not convert: the new type stays, and is refused below
    kept = [f.with_type(columns[f.name].type) for f in change.kept if f.name in columns]
    conformed = pa.Table.from_arrays([*columns.values(), *(table.column(f.name) for f in change.added)],
                                     schema=pa.schema([*kept, *change.added]))
    leave_out = [vocab.system_time]
    added_columns(dataset, arrow_columns(previous, leave_out), arrow_columns(conformed.schema, leave_out),
                  f"the new data in {files}")
    return conformed


def finish(table: pa.Table, system_time: datetime, vocab: DatasetVocabulary) -> pa.Table:
    """Order rows by event time (stable); columns: system time, event time, the rest."""
    event_time = table.column(vocab.event_time)
    if len(table) > 1 and not _ascending(event_time):
        table = table.take(pc.sort_indices(table, [(vocab.event_time, "ascending")]))
    table = table.select([vocab.event_time,
                          *(c for c in table.column_names if c != vocab.event_time)])
    return table.add_column(0, vocab.system_time,
                            pa.repeat(pa.scalar(system_time, TIMESTAMP), len(table)))


def _ascending(values: pa.ChunkedArray) -> bool:
    values = values.combine_chunks()
    return pc.all(pc.greater_equal(values.slice(1), values.slice(0, len(values) - 1))).as_py()


def max_event_time(table: pa.Table, vocab: DatasetVocabulary) -> datetime | None:
    value = pc.max(table.column(vocab.event_time)).as_py()
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(), UTC)
    return None


def write(table: pa.Table, path: Path) -> bytes:
    """Write the slice's Parquet file; returns its physical hash (without reading it back)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue()
    with open(path, "wb") as f:
        f.write(data)
        # made durable here, while the caller's logical hash still runs: the commit's own
        # fsync of the file then finds nothing left to write
        f.flush()
        os.fsync(f.fileno())
    return physical_hash(data)
