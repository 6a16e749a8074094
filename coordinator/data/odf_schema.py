"""The ODF schema (``SetDataSchema.schema``, RFC-016) of a stored slice's Arrow schema.

Invariants:

- The schema is the *logical* one the reference records: its ingest converts the slice's Arrow
  schema (kamu-cli ``src/odf/metadata/src/data/arrow_conversions.rs``, ``new_from_arrow``) and
  strips the encoding hints (``strip_encoding``: string and binary offset widths, Date64 as
  milliseconds, decimal bit widths), so ``Utf8`` and ``LargeUtf8`` are both ``String``.
- A nullable field (a nullable list item too) is ``Option`` around its type; a required one is
  its type alone.
- Only the types a stored slice holds (``odf_slice.stored_type``) are given a schema; any other
  Arrow type is refused in one line naming the column.
- ``grown_schema``: a slice fitted to the dataset's schema in force, and the ``SetDataSchema``
  it needs first, as ``metadata.schema_evolution`` allows.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pyarrow as pa

from ..metadata.odf39 import data as d
from ..metadata.schema_evolution import Column, added_columns, odf_columns, type_text
from .odf_slice import SliceLayoutError

_UNITS = {"s": d.TimeUnit.SECOND, "ms": d.TimeUnit.MILLISECOND, "us": d.TimeUnit.MICROSECOND,
          "ns": d.TimeUnit.NANOSECOND}
_PLAIN: dict[pa.DataType, d.DataType] = {
    pa.bool_(): d.DataTypeBool(), pa.int8(): d.DataTypeInt8(), pa.int16(): d.DataTypeInt16(),
    pa.int32(): d.DataTypeInt32(), pa.int64(): d.DataTypeInt64(), pa.uint8(): d.DataTypeUInt8(),
    pa.uint16(): d.DataTypeUInt16(), pa.uint32(): d.DataTypeUInt32(),
    pa.uint64(): d.DataTypeUInt64(), pa.float16(): d.DataTypeFloat16(),
    pa.float32(): d.DataTypeFloat32(), pa.float64(): d.DataTypeFloat64(),
    pa.string(): d.DataTypeString(), pa.large_string(): d.DataTypeString(),
    pa.binary(): d.DataTypeBinary(), pa.large_binary(): d.DataTypeBinary(),
    pa.date32(): d.DataTypeDate(), pa.date64(): d.DataTypeDate(),
}


def data_schema(schema: pa.Schema) -> d.DataSchema:
    """The ODF schema of a slice whose Arrow schema is ``schema``."""
    return d.DataSchema(fields=[_field(f, f.name) for f in schema])


def arrow_columns(schema: pa.Schema, leave_out: Iterable[str] = ()) -> list[Column]:
    """The columns of a 0.18 slice's Arrow schema, but those named in ``leave_out``: compared
    by Arrow type, nullability not recorded (so not compared), each type named as the ODF schema
    names it (``Int64``, as a 0.39 refusal does), or as Arrow does if ODF has no such type."""
    skip = set(leave_out)
    return [Column(f.name, f.type, _type_name(f.type), None) for f in schema if f.name not in skip]


def _type_name(t: pa.DataType) -> str:
    try:
        return type_text(_type(t, ""))
    except SliceLayoutError:  # a 0.18 slice may hold a type no stored 0.39 slice has
        return str(t)


def _field(f: pa.Field, place: str) -> d.DataField:
    return d.DataField(name=f.name, type=_nullable(f, place))


def _nullable(f: pa.Field, place: str) -> d.DataType:
    t = _type(f.type, place)
    return d.DataTypeOption(inner=t) if f.nullable else t


def _type(t: pa.DataType, place: str) -> d.DataType:
    if isinstance(t, pa.BaseExtensionType):
        return _type(t.storage_type, place)
    if t in _PLAIN:
        return _PLAIN[t]
    if pa.types.is_timestamp(t):
        return d.DataTypeTimestamp(unit=_UNITS[t.unit], timezone=t.tz)
    if pa.types.is_time(t):
        return d.DataTypeTime(unit=_UNITS[t.unit])
    if pa.types.is_decimal(t):
        return d.DataTypeDecimal(precision=t.precision, scale=t.scale)
    if pa.types.is_fixed_size_binary(t):
        return d.DataTypeBinary(fixed_length=t.byte_width)
    if pa.types.is_struct(t):
        return d.DataTypeStruct(fields=[_field(f, f"{place}.{f.name}") for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        size = t.list_size if pa.types.is_fixed_size_list(t) else None
        return d.DataTypeList(item_type=_nullable(t.value_field, f"{place}[]"), fixed_length=size)
    raise SliceLayoutError(f"column {place!r}: {t} is no type of a stored slice; build the "
                           "slice with odf_slice.build_slice")


def grown_schema(dataset: str, table: pa.Table, in_force: d.DataSchema | None, subject: str,
                 legacy: bool = False) -> tuple[pa.Table, d.DataSchema | None]:
    """A 0.39 slice's stored ``table`` fitted to the dataset's schema ``in_force``, and the schema
    a ``SetDataSchema`` must record before it (None: ``in_force`` is its schema).

    Nullability is the data's only where it can be the schema's: a column the schema has as
    optional stays optional, a required one whose values hold no null stays required, a new
    column is optional (the earlier records have no value for it). Any other change is refused
    (``metadata.schema_evolution.added_columns``). ``legacy``: ``in_force`` comes from a
    pre-RFC-016 Arrow schema, which says nothing of nullability (the reference compares none
    across that upgrade).
    """
    if in_force is None:
        return table, data_schema(table.schema)
    if not legacy:
        required = {c.name for c in odf_columns(in_force) if c.required}
        fields = [f.with_nullable(f.name not in required or table[f.name].null_count > 0)
                  for f in table.schema]
        if fields != list(table.schema):
            table = pa.Table.from_arrays(table.columns, schema=pa.schema(fields))
    new = data_schema(table.schema)
    old_columns, new_columns = odf_columns(in_force), odf_columns(new)
    if new_columns == old_columns:  # attributes the schema in force carries are kept
        return table, None
    if legacy:
        old_columns = [dataclasses.replace(c, required=None) for c in old_columns]
        new_columns = [dataclasses.replace(c, required=None) for c in new_columns]
    added_columns(dataset, old_columns, new_columns, subject)
    return table, new
