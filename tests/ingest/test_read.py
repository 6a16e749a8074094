"""Read step: every CSV option, JSON Lines, GeoJSON, Parquet; errors name file, line, column."""
import random
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.ingest import IngestError
from coordinator.ingest.read import read
from coordinator.metadata.objects import (
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJsonLines,
    ReadStepParquet,
)

from .conftest import write


def read_csv(tmp_path, text: str, **options) -> pa.Table:
    return read(write(tmp_path / "in.csv", text), ReadStepCsv(**options), "in.csv")


def test_csv_schema_gives_names_and_types_with_header_skipped(tmp_path):
    t = read_csv(tmp_path, "x,y,z\n1,a,1.50\n", header=True,
                 schema=["id BIGINT", "name STRING", "price DECIMAL(10,2)"])
    assert t.schema == pa.schema([("id", pa.int64()), ("name", pa.string()),
                                  ("price", pa.decimal128(10, 2))])
    assert t.to_pylist() == [{"id": 1, "name": "a", "price": Decimal("1.50")}]


def test_csv_without_header_or_schema_gets_spark_names_and_inferred_types(tmp_path):
    t = read_csv(tmp_path, "1,a\n2,b\n")
    assert t.column_names == ["_c0", "_c1"]
    assert t.schema.field("_c0").type == pa.int64()


def test_csv_header_names_columns_and_types_are_inferred(tmp_path):
    t = read_csv(tmp_path, "id,when\n1,2020-01-01\n", header=True)
    assert t.schema == pa.schema([("id", pa.int64()), ("when", pa.date32())])


def test_csv_infer_schema_false_reads_text(tmp_path):
    t = read_csv(tmp_path, "id\n007\n", header=True, infer_schema=False)
    assert t.to_pylist() == [{"id": "007"}]


def test_csv_enforce_schema_false_matches_header_by_name(tmp_path):
    t = read_csv(tmp_path, "b,a\nx,1\n", header=True, enforce_schema=False,
                 schema=["a INT", "b STRING"])
    assert t.to_pylist() == [{"a": 1, "b": "x"}]


def test_csv_enforce_schema_false_names_a_missing_column(tmp_path):
    with pytest.raises(IngestError, match="in.csv: the header has no column 'c'"):
        read_csv(tmp_path, "a,b\n1,2\n", header=True, enforce_schema=False,
                 schema=["a INT", "c INT"])


def test_csv_separator_quote_and_escape(tmp_path):
    t = read_csv(tmp_path, "'a;b';'it\\'s'\n", separator=";", quote="'", escape="\\",
                 schema=["x STRING", "y STRING"])
    assert t.to_pylist() == [{"x": "a;b", "y": "it's"}]


def test_csv_comment_lines_are_skipped_and_lines_still_counted(tmp_path):
    t = read_csv(tmp_path, "# a comment\nid\n1\n", header=True, comment="#", schema=["id INT"])
    assert t.to_pylist() == [{"id": 1}]
    with pytest.raises(IngestError, match=r"^in.csv:4: column 'id'"):
        read_csv(tmp_path, "id\n1\n# note\nx\n", header=True, comment="#", schema=["id INT"])


def test_csv_null_value_and_empty_value(tmp_path):
    t = read_csv(tmp_path, 'a,b\nNA,""\n,x\n', header=True, null_value="NA", empty_value="-",
                 schema=["a STRING", "b STRING"])
    assert t.to_pylist() == [{"a": None, "b": "-"}, {"a": None, "b": "x"}]


def test_csv_empty_field_is_null_by_default(tmp_path):
    t = read_csv(tmp_path, "a,b\n,1\n", header=True, schema=["a STRING", "b INT"])
    assert t.to_pylist() == [{"a": None, "b": 1}]


def test_csv_nan_and_infinity_tokens(tmp_path):
    t = read_csv(tmp_path, "v\nnope\nbig\nsmall\n1.5\n", header=True, nan_value="nope",
                 positive_inf="big", negative_inf="small", schema=["v DOUBLE"])
    values = t.column("v").to_pylist()
    assert values[0] != values[0] and values[1:] == [float("inf"), float("-inf"), 1.5]


def test_csv_date_and_timestamp_formats_in_java_or_strftime_syntax(tmp_path):
    t = read_csv(tmp_path, "d,t\n31/12/2020,2020.12.31 23:59\n", header=True,
                 date_format="dd/MM/yyyy", timestamp_format="%Y.%m.%d %H:%M",
                 schema=["d DATE", "t TIMESTAMP"])
    assert t.to_pylist() == [{"d": date(2020, 12, 31), "t": datetime(2020, 12, 31, 23, 59, tzinfo=UTC)}]


def test_csv_unknown_java_time_letters_are_refused_by_name(tmp_path):
    with pytest.raises(IngestError, match="unsupported pattern letters 'QQ'"):
        read_csv(tmp_path, "d\n2020-Q1\n", header=True, date_format="yyyy-QQ", schema=["d DATE"])


def test_csv_timestamp_accepts_dates_zones_and_zoneless_values(tmp_path):
    t = read_csv(tmp_path, "t\n2020-01-01\n2020-01-01T10:00:00+02:00\n2020-01-01 10:00:00\n",
                 header=True, schema=["t TIMESTAMP"])
    assert t.column("t").to_pylist() == [
        datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 1, 8, tzinfo=UTC),
        datetime(2020, 1, 1, 10, tzinfo=UTC)]


def test_csv_whitespace_trimming(tmp_path):
    t = read_csv(tmp_path, "a,b\n  x  , 1 \n", header=True, ignore_leading_white_space=True,
                 ignore_trailing_white_space=True, schema=["a STRING", "b INT"])
    assert t.to_pylist() == [{"a": "x", "b": 1}]


def test_csv_multi_line_values(tmp_path):
    t = read_csv(tmp_path, 'a,b\n"line one\nline two",1\n', header=True, multi_line=True,
                 schema=["a STRING", "b INT"])
    assert t.to_pylist() == [{"a": "line one\nline two", "b": 1}]


def test_csv_record_longer_than_a_read_block_is_read_whole(tmp_path):
    # declared types are read in 4 MiB blocks, which a record may overrun once, not twice
    long = "x" * (9 << 20)
    t = read_csv(tmp_path, f"id,text\n1,{long}\n2,b\n", header=True,
                 schema=["id INT", "text STRING"])
    assert t["id"].to_pylist() == [1, 2]
    assert [len(v) for v in t["text"].to_pylist()] == [len(long), 1]


def test_csv_encoding(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes("name\nZürich\n".encode("latin-1"))
    t = read(path, ReadStepCsv(header=True, encoding="latin-1"), "in.csv")
    assert t.to_pylist() == [{"name": "Zürich"}]


def test_csv_row_with_too_few_columns_names_file_and_line(tmp_path):
    with pytest.raises(IngestError, match=r"^in.csv:4: Expected 2 columns, got 1"):
        read_csv(tmp_path, "a,b\n1,2\n\n3\n", header=True, schema=["a INT", "b INT"])


def test_csv_unconvertible_value_names_file_line_and_column(tmp_path):
    with pytest.raises(IngestError, match=r"^in.csv:3: column 'b': .*'x'"):
        read_csv(tmp_path, "a,b\n1,2\n3,x\n", header=True, schema=["a INT", "b INT"])


def test_csv_bad_timestamp_names_row_and_column(tmp_path):
    with pytest.raises(IngestError, match=r"in.csv: row 2, column 't': cannot read 'soon'"):
        read_csv(tmp_path, "t\n2020-01-01\nsoon\n", header=True, schema=["t TIMESTAMP"])


def test_csv_multi_character_separator_is_refused(tmp_path):
    with pytest.raises(IngestError, match="separator must be one character"):
        read_csv(tmp_path, "a\n", separator="||")


# --- JSON Lines --------------------------------------------------------------------------------


def test_json_lines_with_schema(tmp_path):
    path = write(tmp_path / "in.jsonl", '{"id": 1, "t": "2020-01-01T00:00:00Z", "extra": 0}\n'
                                        '{"id": 2, "t": "2020-01-02"}\n')
    t = read(path, ReadStepJsonLines(schema=["id BIGINT", "t TIMESTAMP"]), "in.jsonl")
    assert t.to_pylist() == [{"id": 1, "t": datetime(2020, 1, 1, tzinfo=UTC)},
                             {"id": 2, "t": datetime(2020, 1, 2, tzinfo=UTC)}]


def test_json_lines_timestamp_format(tmp_path):
    path = write(tmp_path / "in.jsonl", '{"t": "01.02.2020 10:30"}\n')
    t = read(path, ReadStepJsonLines(schema=["t TIMESTAMP"], timestamp_format="dd.MM.yyyy HH:mm"),
             "in.jsonl")
    assert t.column("t").to_pylist() == [datetime(2020, 2, 1, 10, 30, tzinfo=UTC)]


def test_json_lines_primitives_as_string(tmp_path):
    path = write(tmp_path / "in.jsonl", '{"a": 1, "b": true}\n')
    t = read(path, ReadStepJsonLines(primitives_as_string=True), "in.jsonl")
    assert t.to_pylist() == [{"a": "1", "b": "true"}]


def test_json_lines_multi_line_objects(tmp_path):
    path = write(tmp_path / "in.json", '{\n  "a": 1\n}\n{\n  "a": 2\n}\n')
    t = read(path, ReadStepJsonLines(multi_line=True), "in.json")
    assert t.column("a").to_pylist() == [1, 2]


def test_json_lines_bad_line_names_file_and_line(tmp_path):
    path = write(tmp_path / "in.jsonl", '{"a": 1}\n{"a": 2}\n{"a": oops}\n')
    with pytest.raises(IngestError, match=r"^in.jsonl:3: "):
        read(path, ReadStepJsonLines(), "in.jsonl")


# --- GeoJSON, shapefiles -----------------------------------------------------------------------


def test_geojson_properties_become_columns_and_geometry_is_text(tmp_path):
    path = write(tmp_path / "in.geojson", """
        {"type": "FeatureCollection", "features": [
          {"type": "Feature", "properties": {"id": 1, "name": "a"},
           "geometry": {"type": "Point", "coordinates": [1.5, 2]}}]}
    """)
    t = read(path, ReadStepGeoJson(schema=["id INT", "name STRING", "geometry STRING"]), "g")
    assert t.to_pylist() == [
        {"id": 1, "name": "a", "geometry": '{"type":"Point","coordinates":[1.5,2]}'}]


def test_geojson_must_be_a_feature_collection(tmp_path):
    path = write(tmp_path / "in.geojson", '{"type": "Point", "coordinates": [0, 0]}')
    with pytest.raises(IngestError, match="FeatureCollection"):
        read(path, ReadStepGeoJson(), "in.geojson")


def test_esri_shapefile_is_refused_clearly(tmp_path):
    with pytest.raises(IngestError, match="shapefiles is not supported"):
        read(write(tmp_path / "x.zip", "x"), ReadStepEsriShapefile(), "x.zip")


# --- Parquet ------------------------------------------------------------------------------------


def parquet_file(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "day": ["2020-01-01", None],
                             "extra": [1.5, 2.5]}), path)
    return path


def test_parquet_without_schema_keeps_the_stored_columns_and_types(tmp_path):
    t = read(parquet_file(tmp_path), ReadStepParquet(), "in.parquet")
    assert t.schema == pa.schema([("id", pa.int32()), ("day", pa.string()), ("extra", pa.float64())])


def test_parquet_schema_selects_orders_and_converts_columns(tmp_path):
    t = read(parquet_file(tmp_path), ReadStepParquet(schema=["day DATE", "id BIGINT", "note STRING"]),
             "in.parquet")
    assert t.schema == pa.schema([("day", pa.date32()), ("id", pa.int64()), ("note", pa.string())])
    assert t.to_pylist() == [{"day": date(2020, 1, 1), "id": 1, "note": None},
                             {"day": None, "id": 2, "note": None}]


def test_parquet_file_that_is_not_parquet_is_named(tmp_path):
    with pytest.raises(IngestError, match="^in.parquet: not a readable Parquet file"):
        read(write(tmp_path / "in.parquet", "id,day\n1,2\n"), ReadStepParquet(), "in.parquet")


# --- DECIMAL as Spark's CSV reader reads it: half-up to the declared scale ----------------------

TIES_AND_SIGNS = ["0.00005", "-0.00005", "1.23445", "-1.23445", "1.23435", "-1.23435",
                  "2.00004999999999999", "-2.00004999999999999", "0", "-0", "7", "-7.1",
                  "99999999999999.99994", "-99999999999999.99994"]


def half_up(text: str, scale: int) -> Decimal:
    """The answer of Python's decimal module (ROUND_HALF_UP: ties away from zero, as Java's)."""
    return Decimal(text).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)


def fifteen_decimals(n: int, seed: int = 18) -> list[str]:
    rnd = random.Random(seed)
    return [f"{rnd.choice('-+')}{rnd.randrange(10**6)}.{rnd.randrange(10**15):015d}".lstrip("+")
            for _ in range(n)]


def test_csv_decimals_with_more_digits_than_the_scale_are_rounded_half_up(tmp_path):
    values = TIES_AND_SIGNS + fifteen_decimals(2000)
    t = read_csv(tmp_path, "price\n" + "\n".join(values) + "\n", header=True,
                 schema=["price DECIMAL(18,4)"])
    assert t.schema.field("price").type == pa.decimal128(18, 4)
    assert t.column("price").to_pylist() == [half_up(v, 4) for v in values]


def test_decimal_ties_round_away_from_zero_at_scale_zero(tmp_path):
    t = read_csv(tmp_path, "n\n2.5\n-2.5\n3.5\n-3.5\n0.49\n", header=True, schema=["n DECIMAL(5,0)"])
    assert t.column("n").to_pylist() == [Decimal(3), Decimal(-3), Decimal(4), Decimal(-4), Decimal(0)]


def test_csv_decimal_that_does_not_fit_the_precision_names_file_row_and_column(tmp_path):
    # rounding carries it to 15 integer digits, one more than DECIMAL(18,4) holds
    with pytest.raises(IngestError, match=r"^in.csv: row 3, column 'price': cannot read "
                                          r"'99999999999999.99995' as decimal128\(18, 4\) "
                                          r"\(more than 14 digits before the decimal point\)"):
        read_csv(tmp_path, "id,price\n1,1.5\n2,2.5\n3,99999999999999.99995\n", header=True,
                 schema=["id INT", "price DECIMAL(18,4)"])


def test_csv_decimal_that_is_not_a_number_is_refused_without_a_precision_reason(tmp_path):
    with pytest.raises(IngestError, match=r"row 2, column 'price': cannot read 'cheap' as "
                                          r"decimal128\(18, 4\)$"):
        read_csv(tmp_path, "price\n1.5\ncheap\n", header=True, schema=["price DECIMAL(18,4)"])


def test_json_lines_decimals_are_rounded_half_up_like_csv(tmp_path):
    values = TIES_AND_SIGNS + fifteen_decimals(500, seed=3)
    path = write(tmp_path / "in.jsonl", "".join(f'{{"price": {v}}}\n' for v in values))
    t = read(path, ReadStepJsonLines(schema=["price DECIMAL(18,4)"]), "in.jsonl")
    assert t.column("price").to_pylist() == [half_up(v, 4) for v in values]


def test_json_lines_decimal_that_does_not_fit_names_file_row_and_column(tmp_path):
    path = write(tmp_path / "in.jsonl", '{"price": 1.25}\n{"price": 99999999999999.99995}\n')
    with pytest.raises(IngestError, match=r"^in.jsonl: row 2, column 'price': .*more than 14 digits"):
        read(path, ReadStepJsonLines(schema=["price DECIMAL(18,4)"]), "in.jsonl")


def test_parquet_decimals_of_a_larger_scale_are_rounded_half_up(tmp_path):
    values = TIES_AND_SIGNS + fifteen_decimals(200, seed=5)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"price": pa.array([Decimal(v) for v in values], pa.decimal128(38, 17))}),
                   path)
    t = read(path, ReadStepParquet(schema=["price DECIMAL(18,4)"]), "in.parquet")
    assert t.column("price").to_pylist() == [half_up(v, 4) for v in values]
