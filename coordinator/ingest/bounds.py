"""Times a root refuses at ingest, checked on the records as read (after the preprocess step)
and before the merge, so nothing of a refused file is stored. Invariants of every stored slice:

- every time (a timestamp or a date, at any depth of a struct, list or map column) lies in the
  years 1 to 9999, which every reader of a slice handles (Python's ``datetime``, DuckDB,
  Spark, the reference); one year-20000 value stored would make ``coord tail`` and ``coord
  sql`` fail on the whole dataset;
- no event time lies more than ``ingest.eventTimeHorizon`` (default one day) ahead of the
  system time of the block it is committed in, the records' own and the one a polled file
  takes from its path or metadata alike: the watermark follows the latest event time, and
  one record dated 9999-12-31 would hold it (and its derivatives') there for good, every
  later genuine record arriving behind it.

A refusal is one line naming the file (or the pushed data), the row and the column. The
checks are Arrow kernels over whole columns; only the first offending row is looked at in
Python.
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..metadata.timestamps import UTC, format_timestamp
from .errors import IngestError

_FIRST_S, _END_S = -62135596800, 253402300800  # 0001-01-01 and 10000-01-01, in Unix seconds
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6}  # "ns" spans 1677..2262 only: always in range


def check_time_range(table: pa.Table, name: str, rows_before: int = 0,
                     columns: list[str] | None = None) -> None:
    """Refuse a time outside the years 1 to 9999 in ``columns`` (default: all) of ``table``
    (the records of ``name`` after its first ``rows_before``)."""
    for column in table.column_names if columns is None else columns:
        if not _has_time(table.schema.field(column).type):
            continue
        start = rows_before
        for chunk in table.column(column).chunks:
            for path, bad in _out_of_range(chunk, column):
                if bad.any():
                    row = int(np.argmax(bad))
                    raise IngestError(f"{name}: row {start + row + 1}: column {path!r}: "
                                      f"{_shown(chunk, path, row)} is out of range: times must "
                                      "lie in the years 1 to 9999")
            start += len(chunk)


def check_horizon(table: pa.Table, column: str, system_time: datetime, horizon_s: float,
                  name: str, rows_before: int = 0) -> None:
    """Refuse a record of ``table`` whose event time (``column``: a UTC timestamp or a date)
    is more than ``horizon_s`` seconds after ``system_time``."""
    limit = system_time + timedelta(seconds=horizon_s)
    values = table.column(column)
    if pa.types.is_date(values.type):
        ahead = pc.greater(values, pa.scalar(_last_day_within(limit), values.type))
    else:
        ahead = pc.greater(values, pa.scalar(limit, values.type))
    if pc.any(ahead).as_py():
        row = pc.index(ahead, True).as_py()
        raise IngestError(f"{name}: row {rows_before + row + 1}: event time {column!r} "
                          f"{_text(values[row].as_py())} is {_beyond(horizon_s)}")


def check_source_time(t: datetime, system_time: datetime, horizon_s: float, name: str) -> None:
    """Refuse the event time given for a file's records (by a polled source's path or
    metadata, by a push's ``--event-time``) beyond the horizon."""
    if t > system_time + timedelta(seconds=horizon_s):
        raise IngestError(f"{name}: the event time given for its records, {format_timestamp(t)}, "
                          f"is {_beyond(horizon_s)}")


def _beyond(horizon_s: float) -> str:
    """The end of a horizon refusal: what it protects and the way out."""
    return (f"more than {_span(horizon_s)} ahead of the clock; it would hold the watermark "
            "there and make every later record late (correct the time, or allow more with "
            "coord config set ingest.eventTimeHorizon)")


def _span(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' * (n != 1)}"
    return f"{seconds:g} seconds"


def _last_day_within(limit: datetime) -> date:
    """The last date whose start is at or before ``limit`` (a date is its day's first instant)."""
    return limit.astimezone(UTC).date()


def _text(value: object) -> str:
    return format_timestamp(value) if isinstance(value, datetime) else str(value)


def _out_of_range(values: pa.Array, path: str) -> Iterator[tuple[str, np.ndarray]]:
    """Per time field under ``values`` (its path), whether each of ``values``' rows holds a
    time outside the years 1 to 9999 there."""
    t = values.type
    if pa.types.is_dictionary(t):
        yield from _out_of_range(values.dictionary_decode(), path)
    elif pa.types.is_timestamp(t) or pa.types.is_date(t):
        bounds = _bounds(t)
        if bounds is not None:
            ints = values.cast(pa.int32() if pa.types.is_date32(t) else pa.int64())
            bad = pc.or_(pc.less(ints, bounds[0]), pc.greater_equal(ints, bounds[1]))
            yield path, pc.fill_null(bad, False).to_numpy(zero_copy_only=False)
    elif pa.types.is_struct(t):
        for field, child in zip(t, values.flatten(), strict=True):  # parents' nulls applied
            yield from _out_of_range(child, f"{path}.{field.name}")
    elif pa.types.is_map(t):  # its layout is a list of (key, value) entries
        entries = pa.struct([t.key_field, t.item_field])
        yield from _out_of_range(values.view(pa.list_(pa.field("entries", entries, False))), path)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if _has_time(t):
            parents = pc.list_parent_indices(values).to_numpy()
            for sub, bad in _out_of_range(values.flatten(), f"{path}[]"):
                yield sub, np.bincount(parents[bad], minlength=len(values)) > 0


def _has_time(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_time(t.value_type)
    return any(_has_time(t.field(i).type) for i in range(t.num_fields))


def _bounds(t: pa.DataType) -> tuple[int, int] | None:
    """The first value of year 1 and the first of year 10000 in ``t``'s integer encoding."""
    if pa.types.is_date32(t):
        return _FIRST_S // 86400, _END_S // 86400
    per_second = 1000 if pa.types.is_date64(t) else _PER_SECOND.get(t.unit)
    return None if per_second is None else (_FIRST_S * per_second, _END_S * per_second)


def _shown(chunk: pa.Array, path: str, row: int) -> str:
    """The offending value of a top-level time column as Arrow writes it (Python's datetime
    cannot hold it); a nested one is named by its path only."""
    if "." in path or "[]" in path:
        return "a time"
    value = chunk.slice(row, 1)
    if pa.types.is_dictionary(value.type):
        value = value.dictionary_decode()
    if not pa.types.is_date(value.type):
        return str(value.cast(pa.string())[0].as_py())
    # a date as its first instant, which Arrow writes however far out it is
    # days (date32) or milliseconds (date64)
    encoded = value.cast(pa.int32() if pa.types.is_date32(value.type) else pa.int64())[0].as_py()
    seconds = encoded * 86400 if pa.types.is_date32(value.type) else encoded // 1000
    return str(pa.array([seconds], pa.timestamp("s")).cast(pa.string())[0].as_py()).split(" ")[0]
