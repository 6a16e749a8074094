"""Query results as Python values, JSON and CSV, for every type DuckDB returns or a slice holds:
one conversion for ``coord sql``'s outputs, ``coord tail`` and the API's answers.

Invariants:
- Nothing a result holds makes an output fail. A value Python has no type for is text:
  DuckDB's infinite timestamps and dates ``infinity`` / ``-infinity``; a timestamp or date
  outside years 1 to 9999 its ISO form (numpy's ``datetime64`` reaches those years, with
  ``Z`` when the column has a time zone); ``TIME '24:00:00'`` as written; a float's infinity
  or NaN ``inf``, ``-inf``, ``nan`` (as DuckDB and CSV write them; JSON has no number for
  them); an interval ISO 8601's ``P<months>M<days>DT<seconds>S``. Inside lists, structs and
  maps too.
- ``python_rows`` are the records the JSON and table outputs show; ``json_value`` (tail.py)
  writes the rest of their values in JSON (times RFC 3339, decimals exactly, bytes as hex);
  a table's cell shows a nested value as its JSON (``cell_text``).
- ``csv_table`` keeps the columns Arrow's CSV writer writes (numbers, text, booleans,
  decimals, times and dates, when all are in range); every other column becomes text: a
  list, struct, map or union its JSON, bytes hex, the rest as in JSON.
"""
from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .tail import json_value

if TYPE_CHECKING:
    import pyarrow as pa

# DuckDB's infinite timestamp (any unit) and date, as they arrive in Arrow
INFINITE_TIMESTAMP = 2**63 - 1
INFINITE_DATE = 2**31 - 1
# the instants Python's datetime holds, in seconds and days from 1970-01-01, a day inside
# years 1 and 9999 so that a column's time zone cannot push one out
PYTHON_SECONDS = (-62135596800 + 86400, 253402300799 - 86400)
PYTHON_DAYS = (-719162 + 1, 2932896 - 1)
PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
DAY_SECONDS = 86400


def python_rows(data: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """The records of ``data``, each value as ``python_values`` gives it."""
    columns = [python_values(column) for column in data.columns]
    if not columns:
        return [{} for _ in range(data.num_rows)]
    return [dict(zip(data.column_names, row, strict=True)) for row in zip(*columns, strict=True)]


def python_values(values: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The values of one column as Python holds them (see the module doc for those it cannot)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        return [v for chunk in values.chunks for v in python_values(chunk)]
    kind = values.type
    if not _needs_care(kind):
        return values.to_pylist()
    if pa.types.is_dictionary(kind):
        return python_values(values.dictionary_decode())
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return _instants(values)
    if pa.types.is_time(kind):
        return _times(values)
    if pa.types.is_floating(kind):
        finite = pc.all(pc.is_finite(values)).as_py() is not False
        return values.to_pylist() if finite else [_float(v) for v in values.to_pylist()]
    if pa.types.is_interval(kind):
        return [None if v is None else _duration(*v) for v in values.to_pylist()]
    if pa.types.is_map(kind):
        entries = values.cast(pa.list_(pa.field("entries", pa.struct([kind.key_field, kind.item_field]),
                                                nullable=False)))
        return [None if e is None else [(pair["key"], pair["value"]) for pair in e]
                for e in python_values(entries)]
    if pa.types.is_struct(kind):
        fields = [python_values(field) for field in values.flatten()]
        names = [kind.field(i).name for i in range(kind.num_fields)]
        valid = values.is_valid().to_pylist()
        return [dict(zip(names, row, strict=True)) if ok else None
                for ok, row in zip(valid, zip(*fields, strict=True), strict=True)]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        items, at, out = python_values(values.flatten()), 0, []
        for n in pc.list_value_length(values).to_pylist():  # a null list takes no items
            out.append(None if n is None else items[at:at + n])
            at += n or 0
        return out
    return values.to_pylist()  # a union, or a type DuckDB does not return


def csv_table(data: pa.Table) -> pa.Table:
    """``data`` with every column Arrow's CSV writer cannot write as it is made text."""
    import pyarrow as pa

    columns = []
    for column in data.columns:
        kind = column.type
        if not _csv_native(kind):
            columns.append(pa.array([_text(v) for v in python_values(column)], pa.string()))
            continue
        # an instant Python holds is written by Arrow: only a column with others is looked at
        instant = pa.types.is_timestamp(kind) or pa.types.is_date(kind)
        temporal = instant and not _instant_range(column)[-1] or pa.types.is_time(kind)
        special = [v if isinstance(v, str) else None for v in python_values(column)] if temporal else []
        if any(v is not None for v in special):  # as Arrow writes the others, these as text
            written = column.cast(pa.string()).to_pylist()
            column = pa.array([w if v is None else v for v, w in zip(special, written, strict=True)],
                              pa.string())
        columns.append(column)
    return pa.table(columns, names=data.column_names)


def _csv_native(kind: pa.DataType) -> bool:
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(kind):
        return _csv_native(kind.value_type)
    return any(check(kind) for check in (
        t.is_integer, t.is_floating, t.is_boolean, t.is_string, t.is_large_string, t.is_decimal,
        t.is_null, t.is_timestamp, t.is_date, t.is_time))


def _needs_care(kind: pa.DataType) -> bool:
    """Whether a value of ``kind`` may be one Python cannot hold (or JSON write), anywhere in it."""
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(kind):
        return _needs_care(kind.value_type)
    if any(check(kind) for check in (t.is_timestamp, t.is_date, t.is_time, t.is_floating, t.is_interval)):
        return True
    if t.is_map(kind):
        return _needs_care(kind.key_type) or _needs_care(kind.item_type)
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return _needs_care(kind.value_type)
    if t.is_struct(kind):
        return any(_needs_care(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _instant_range(values: pa.Array | pa.ChunkedArray) -> tuple[Any, str, int, int, int, bool]:
    """Timestamps or dates as integers, their unit, the infinite value, the range Python's
    datetime holds in that unit, and whether every value is in it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    days = pa.types.is_date32(kind)
    unit = "D" if days else "ms" if pa.types.is_date64(kind) else kind.unit
    raw = values.cast(pa.int32() if days else pa.int64())
    infinite = INFINITE_DATE if days else INFINITE_TIMESTAMP
    low, high = PYTHON_DAYS if days else (s * PER_SECOND[unit] for s in PYTHON_SECONDS)
    low, high = max(low, -infinite + 1), min(high, infinite - 1)
    span = pc.min_max(raw).as_py()
    held = span["min"] is None or (low <= span["min"] and span["max"] <= high)
    return raw, unit, infinite, low, high, held


def _instants(values: pa.Array) -> list[Any]:
    raw, unit, infinite, low, high, held = _instant_range(values)
    if held:
        return values.to_pylist()
    zone = "Z" if getattr(values.type, "tz", None) else ""
    out: list[Any] = []
    for at, v in enumerate(raw.to_pylist()):
        if v is None or low <= v <= high:
            out.append(None if v is None else values[at].as_py())
        elif abs(v) == infinite:
            out.append("infinity" if v > 0 else "-infinity")
        else:
            out.append(_iso(v, unit) + zone)
    return out


def _iso(value: int, unit: str) -> str:
    import numpy as np

    return str(np.datetime_as_string(np.array([value], dtype=f"datetime64[{unit}]"))[0])


def _times(values: pa.Array) -> list[Any]:
    """Times of day; DuckDB's ``24:00:00`` (the end of a day), which Python has not, as text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    day = DAY_SECONDS * PER_SECOND[values.type.unit]
    raw = values.cast(pa.int32() if pa.types.is_time32(values.type) else pa.int64())
    latest = pc.max(raw).as_py()
    if latest is None or latest < day:
        return values.to_pylist()
    return [None if v is None else "24:00:00" if v >= day else values[at].as_py()
            for at, v in enumerate(raw.to_pylist())]


def _float(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"


def _duration(months: int, days: int, nanoseconds: int) -> str:
    seconds = Decimal(nanoseconds).scaleb(-9).normalize()
    return f"P{months}M{days}DT{seconds:f}S"


def cell_text(value: Any) -> str:
    """A value in a table's cell: a list, struct or map as its JSON, the rest as Python writes it."""
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, default=json_value, ensure_ascii=False)
    return str(value)


def _text(value: Any) -> str | None:
    """A value as one CSV cell: text as it is, a nested value as its JSON, the rest as JSON writes it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, default=json_value, ensure_ascii=False)
    if isinstance(value, bool | int | float):
        return str(value)
    return str(json_value(value))
