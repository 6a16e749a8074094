import pyarrow as pa
import pytest

from coordinator.ingest import IngestError
from coordinator.ingest.schema_ddl import parse_schema


def test_spec_types_map_to_arrow_types():
    schema = parse_schema([
        "b BOOLEAN", "i INT", "l BIGINT", "d DECIMAL(10,2)", "f FLOAT", "x DOUBLE", "u UUID",
        "s STRING", "t TIMESTAMP", "t3 TIMESTAMP(3)", "day DATE", "tm TIME",
    ])
    assert schema.types == [
        pa.bool_(), pa.int32(), pa.int64(), pa.decimal128(10, 2), pa.float32(), pa.float64(),
        pa.string(), pa.string(), pa.timestamp("us", "UTC"), pa.timestamp("ms", "UTC"),
        pa.date32(), pa.time64("us"),
    ]


def test_a_time_with_a_precision_is_in_the_unit_its_digits_need():
    schema = parse_schema(["s TIME(0)", "ms TIME(3)", "us TIME(6)", "ns TIME(9)"])
    assert schema.types == [pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns")]
    with pytest.raises(IngestError, match=r"TIME\(12\): precision must be 0..9"):
        parse_schema(["t TIME(12)"])


def test_colon_spelling_is_accepted():
    assert parse_schema(["a: INT", "b: STRING"]) == pa.schema([("a", pa.int32()), ("b", pa.string())])


def test_several_columns_per_entry_and_trailing_commas():
    schema = parse_schema(["id BIGINT, price DECIMAL(10, 2),", "`full name` STRING,"])
    assert schema.names == ["id", "price", "full name"]
    assert schema.field("price").type == pa.decimal128(10, 2)


def test_unknown_type_is_named():
    with pytest.raises(IngestError, match=r"column 'a': unknown type 'GEOGRAPHY'"):
        parse_schema(["a GEOGRAPHY"])


def test_duplicate_column_is_refused():
    with pytest.raises(IngestError, match="declared twice"):
        parse_schema(["a INT", "a STRING"])


def test_not_null_makes_a_column_required_only_where_declared_nullability_is_asked():
    lines = ["id BIGINT NOT NULL", "price DECIMAL(10, 2) not null, name: STRING"]
    assert parse_schema(lines, declared_nullability=True) == pa.schema(
        [pa.field("id", pa.int64(), nullable=False),
         pa.field("price", pa.decimal128(10, 2), nullable=False), ("name", pa.string())])
    assert parse_schema(lines) == pa.schema(
        [("id", pa.int64()), ("price", pa.decimal128(10, 2)), ("name", pa.string())])
