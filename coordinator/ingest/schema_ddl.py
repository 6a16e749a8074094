"""The ``schema`` of read steps: SQL-like DDL column lines → an Arrow schema.

Each entry is ``name TYPE`` (the spec's form, e.g. ``price DECIMAL(10,2)``) or ``name: TYPE``
(the form in some ODF examples); one entry may also hold several comma-separated columns and a
trailing comma is allowed, so a schema copied from a ``CREATE TABLE`` works. Names may be
`back-quoted`. Types are the spec's DDL types plus common SQL aliases. A type may be followed
by ``NOT NULL`` (the reference's one column option): the column is then required, which only
a 0.39 root's first schema records (``parse_schema(..., declared_nullability=True)``); readers
take every column as nullable and refuse its nulls apart, naming the row.

``TIMESTAMP`` is UTC (``timestamp[us, tz=UTC]``; ``TIMESTAMP(p)`` picks the unit from the
precision). ``TIME`` is in microseconds; ``TIME(p)`` picks the unit the same way (``TIME(3)``:
milliseconds, what an ODF schema's ``Time`` without a unit means). ``UUID`` is kept as its
text form (a ``STRING``), since nothing downstream reads Arrow's UUID extension type.
"""
from __future__ import annotations

import re

import pyarrow as pa

from .errors import IngestError

_SIMPLE = {
    "BOOLEAN": pa.bool_(), "BOOL": pa.bool_(),
    "TINYINT": pa.int8(), "SMALLINT": pa.int16(),
    "INT": pa.int32(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "LONG": pa.int64(),
    "FLOAT": pa.float32(), "REAL": pa.float32(), "DOUBLE": pa.float64(),
    "STRING": pa.string(), "VARCHAR": pa.string(), "CHAR": pa.string(), "TEXT": pa.string(),
    "UUID": pa.string(),
    "DATE": pa.date32(), "TIME": pa.time64("us"), "BINARY": pa.binary(),
}
_KNOWN = sorted({*_SIMPLE, "DECIMAL(p,s)", "TIMESTAMP(p)", "TIME(p)"})

_COLUMN = re.compile(r"^\s*(`[^`]+`|[^\s:`]+)\s*:?\s+(.+?)\s*$")
_TYPE = re.compile(r"^([A-Za-z]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
# split on commas that are not inside parentheses: "a INT, b DECIMAL(10,2)"
_TOP_LEVEL_COMMA = re.compile(r",(?![^(]*\))")
_NOT_NULL = re.compile(r"\s+NOT\s+NULL$", re.IGNORECASE)


def check_read_schema(source) -> None:
    """Refuse (``IngestError``) a root source whose read step declares a schema that does not
    parse, before anything is written (``coord add``): a typo is found at once, not at a pull."""
    schema = getattr(getattr(source, "read", None), "schema", None)
    if schema:
        parse_schema(schema)


def parse_schema(lines: list[str], *, declared_nullability: bool = False) -> pa.Schema:
    """The columns ``lines`` declare, all nullable unless ``declared_nullability`` (then a
    column declared ``NOT NULL`` is not)."""
    fields = []
    for entry in lines:
        for part in _TOP_LEVEL_COMMA.split(entry):
            if part.strip():
                field = _parse_column(part, entry)
                fields.append(field if declared_nullability else field.with_nullable(True))
    names = [f.name for f in fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise IngestError(f"schema: column {dupes[0]!r} is declared twice")
    return pa.schema(fields)


def _parse_column(text: str, entry: str) -> pa.Field:
    m = _COLUMN.match(text)
    if not m:
        raise IngestError(f"schema: {entry!r} is not 'name TYPE'")
    name, type_text = m.group(1).strip("`"), m.group(2)
    required = _NOT_NULL.search(type_text)
    if required:
        type_text = type_text[:required.start()]
    return pa.field(name, parse_type(type_text, context=f"schema: column {name!r}"),
                    nullable=not required)


def parse_type(text: str, context: str = "schema") -> pa.DataType:
    m = _TYPE.match(text.strip())
    if not m:
        raise _unknown_type(text, context)
    word, p, s = m.group(1).upper(), m.group(2), m.group(3)
    if word in ("DECIMAL", "NUMERIC"):
        precision, scale = int(p or 10), int(s or 0)  # Spark's DECIMAL default is (10, 0)
        if not 1 <= precision <= 76 or scale > precision:
            raise IngestError(f"{context}: invalid {text!r} (precision 1..76, scale <= precision)")
        return (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
    if word == "TIMESTAMP" and s is None:
        return pa.timestamp(_timestamp_unit(int(p) if p else 6), tz="UTC")
    if word == "TIME" and p is not None and s is None:
        unit = _timestamp_unit(int(p), "TIME")
        return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    if word in _SIMPLE and (p is None or word in ("VARCHAR", "CHAR")) and s is None:
        return _SIMPLE[word]
    raise _unknown_type(text, context)


def _unknown_type(text: str, context: str) -> IngestError:
    import difflib

    close = difflib.get_close_matches(text.strip().upper(), [*_SIMPLE, "DECIMAL", "TIMESTAMP"], n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return IngestError(f"{context}: unknown type {text!r} ({hint}known: {', '.join(_KNOWN)})")


def _timestamp_unit(precision: int, word: str = "TIMESTAMP") -> str:
    for unit, max_digits in (("s", 0), ("ms", 3), ("us", 6), ("ns", 9)):
        if precision <= max_digits:
            return unit
    raise IngestError(f"{word}({precision}): precision must be 0..9")
