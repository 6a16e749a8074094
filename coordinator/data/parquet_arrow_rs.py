"""The Arrow types arrow-rs reads a Parquet file as, where pyarrow reads it otherwise.

The reference hashes a slice as arrow-rs (parquet 58.3, ``ParquetRecordBatchReaderBuilder``
with its default options) reads it, and arrow-digest V0 hashes a column's type with its data.
Both readers map Parquet's logical types alike and both take hints from the Arrow schema the
writer embedded (``ARROW:schema``), but not the same hints (arrow-rs:
``parquet/src/arrow/schema/primitive.rs``, ``apply_hint``). ``arrow_rs_schema`` gives pyarrow's
schema of a file with each leaf's type replaced by arrow-rs's wherever the two differ in a
way the hash sees; casting pyarrow's batches to it gives the values arrow-rs reads.

Differences handled (measured with pyarrow 26; ``schemas/ODF-039-DATA.md`` lists them):

- a DATE column with a Date64 hint: arrow-rs Date64, pyarrow Date32;
- INT64 without a logical type and a Date64, Timestamp or Time64 hint, INT32 without one and a
  Timestamp or Time32 hint: arrow-rs the hint, pyarrow the plain integer;
- a TIMESTAMP column: arrow-rs takes the hint when it has the stored unit and a time zone,
  else the unit stored and "UTC" when adjusted to UTC, no zone when not; pyarrow does the same
  but drops the hint's zone over a local (not adjusted) timestamp;
- BYTE_ARRAY without a logical type and a string hint: arrow-rs a string, pyarrow binary;
- DECIMAL: arrow-rs Decimal256 for a FIXED_LEN_BYTE_ARRAY longer than 16 bytes and a BYTE_ARRAY
  of precision above 38, else Decimal128 unless a Decimal32/64/256 hint says otherwise;
  pyarrow Decimal128 up to precision 38 (then the hint), whatever the stored length.

Dictionary columns are left as pyarrow reads them (arrow-digest hashes their values; the
reference cannot hash dictionaries at all).
"""
from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["arrow_rs_schema"]

_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


def arrow_rs_schema(f: pq.ParquetFile) -> pa.Schema:
    """pyarrow's schema of ``f`` with arrow-rs's type wherever the hash would see a difference."""
    hints = _embedded_schema(f)
    columns = (f.schema.column(i) for i in range(len(f.schema)))
    fields = []
    for k, field in enumerate(f.schema_arrow):
        hint = hints.field(k).type if hints is not None and len(hints) > k \
            and hints.field(k).name == field.name else None
        fields.append(field.with_type(_type(field.type, hint, columns)))
    return pa.schema(fields, metadata=f.schema_arrow.metadata)


def _embedded_schema(f: pq.ParquetFile) -> pa.Schema | None:
    stored = (f.metadata.metadata or {}).get(b"ARROW:schema")
    if stored is None:
        return None
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored)))
    except (ValueError, pa.ArrowInvalid):  # a reader ignores a hint it cannot read
        return None


def _type(t: pa.DataType, hint: pa.DataType | None, columns: Iterator) -> pa.DataType:
    """``t`` with its leaves read as arrow-rs reads them (consuming their Parquet columns)."""
    if pa.types.is_struct(t):
        hints = [hint.field(i).type for i in range(hint.num_fields)] \
            if hint is not None and pa.types.is_struct(hint) else []
        if len(hints) != t.num_fields:
            hints = [None] * t.num_fields
        return pa.struct([f.with_type(_type(f.type, h, columns))
                          for f, h in zip(t, hints, strict=True)])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item_hint = hint.value_type if hint is not None and hasattr(hint, "value_type") else None
        item = t.value_field.with_type(_type(t.value_type, item_hint, columns))
        if pa.types.is_fixed_size_list(t):
            return pa.list_(item, t.list_size)
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_map(t):
        _type(t.key_type, None, columns)
        _type(t.item_type, None, columns)
        return t  # refused by the hash; only its columns are passed over
    column = next(columns)
    if pa.types.is_dictionary(t):
        return t
    return _leaf(t, hint, column)


def _leaf(t: pa.DataType, hint: pa.DataType | None, column) -> pa.DataType:
    logical = json.loads(column.logical_type.to_json())
    kind, physical = logical["Type"], column.physical_type
    if kind == "Timestamp":
        unit = _UNITS[logical["timeUnit"]]
        if hint is not None and pa.types.is_timestamp(hint) and hint.unit == unit and hint.tz:
            return hint
        return pa.timestamp(unit, "UTC" if logical["isAdjustedToUTC"] else None)
    if kind == "Date":
        return pa.date64() if hint is not None and pa.types.is_date64(hint) else t
    if kind == "Decimal":
        return _decimal(logical["precision"], logical["scale"], physical, column.length, hint)
    if kind != "None" or column.converted_type != "NONE" or hint is None:
        return t
    if physical == "INT64" and (pa.types.is_date64(hint) or pa.types.is_timestamp(hint)
                                or pa.types.is_time64(hint)):
        return hint
    if physical == "INT32" and (pa.types.is_timestamp(hint) or pa.types.is_time32(hint)):
        return hint
    if physical == "BYTE_ARRAY" and (pa.types.is_string(hint) or pa.types.is_large_string(hint)
                                     or pa.types.is_string_view(hint)):
        return t if pa.types.is_string(t) or pa.types.is_large_string(t) else pa.string()
    return t


def _decimal(precision: int, scale: int, physical: str, length: int,
             hint: pa.DataType | None) -> pa.DataType:
    wide = (physical == "FIXED_LEN_BYTE_ARRAY" and length > 16) or (
        physical == "BYTE_ARRAY" and precision > 38)
    if wide:
        return pa.decimal256(precision, scale)
    if hint is not None and isinstance(hint, (pa.Decimal32Type, pa.Decimal64Type,
                                              pa.Decimal256Type)):
        return hint
    return pa.decimal128(precision, scale)
