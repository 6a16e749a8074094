"""``data.odf_schema``: the ODF schema a SetDataSchema records of a stored slice, as the
reference records it (logical types, no encoding hints; nullable fields wrapped in Option)."""
from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from coordinator.data.odf_schema import data_schema
from coordinator.data.odf_slice import SliceLayoutError, build_slice
from coordinator.metadata.odf39 import data as d

MS_UTC = d.DataTypeTimestamp(unit=d.TimeUnit.MILLISECOND, timezone="UTC")


def opt(t: d.DataType) -> d.DataType:
    return d.DataTypeOption(inner=t)


def test_a_built_slice_has_its_system_columns_required_and_its_data_as_given():
    data = pa.table({"event_time": pa.array([datetime(2025, 1, 1, tzinfo=UTC)]),
                     "city": pa.array(["Oslo"]).dictionary_encode(),
                     "area": pa.array([454.0], pa.float32())})
    stored = build_slice(data, system_time=datetime(2026, 1, 1, tzinfo=UTC), prev_offset=None)
    assert [(f.name, f.type) for f in data_schema(stored.schema).fields] == [
        ("offset", d.DataTypeInt64()), ("op", d.DataTypeInt32()), ("system_time", MS_UTC),
        ("event_time", MS_UTC), ("city", opt(d.DataTypeString())),
        ("area", opt(d.DataTypeFloat32()))]


@pytest.mark.parametrize(("arrow", "odf"), [
    (pa.large_string(), d.DataTypeString()),
    (pa.large_binary(), d.DataTypeBinary()),
    (pa.binary(16), d.DataTypeBinary(fixed_length=16)),
    (pa.decimal128(12, 2), d.DataTypeDecimal(precision=12, scale=2)),
    (pa.date32(), d.DataTypeDate()),
    (pa.time64("us"), d.DataTypeTime(unit=d.TimeUnit.MICROSECOND)),
    (pa.timestamp("ns", "Europe/Oslo"), d.DataTypeTimestamp(unit=d.TimeUnit.NANOSECOND,
                                                            timezone="Europe/Oslo")),
    (pa.timestamp("us"), d.DataTypeTimestamp(unit=d.TimeUnit.MICROSECOND)),
    (pa.list_(pa.field("element", pa.int32(), nullable=False)),
     d.DataTypeList(item_type=d.DataTypeInt32())),
    (pa.list_(pa.int32(), 3), d.DataTypeList(item_type=opt(d.DataTypeInt32()), fixed_length=3)),
    (pa.struct([pa.field("a", pa.bool_(), nullable=False), ("b", pa.uint16())]),
     d.DataTypeStruct(fields=[d.DataField(name="a", type=d.DataTypeBool()),
                              d.DataField(name="b", type=opt(d.DataTypeUInt16()))])),
])
def test_each_stored_type_has_its_logical_odf_type(arrow, odf):
    [field] = data_schema(pa.schema([pa.field("c", arrow, nullable=False)])).fields
    assert field == d.DataField(name="c", type=odf)


def test_a_type_no_slice_stores_is_refused_naming_the_column():
    schema = pa.schema([("s", pa.struct([("m", pa.map_(pa.string(), pa.int8()))]))])
    with pytest.raises(SliceLayoutError, match=r"^column 's\.m': map<string, int8> is no type "
                                               "of a stored slice"):
        data_schema(schema)
