"""``coord sql``'s outputs (table, json, csv, parquet) write whatever DuckDB returns: nested
values, DuckDB's infinite and far timestamps, non-finite floats, intervals, bytes; what a
format cannot hold is refused in one line, never an internal error."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cli import coord

EVERY_TYPE = """SELECT [1, 2] AS l, {'a': 1, 'b': [TIMESTAMP 'infinity']} AS s, MAP {'k': 1.5} AS m,
  [1, 2]::INTEGER[2] AS fixed, union_value(n := 2)::UNION(n INTEGER, s VARCHAR) AS u,
  TIMESTAMP 'infinity' AS t, TIMESTAMPTZ '-infinity' AS tz, DATE 'infinity' AS d,
  TIMESTAMP_NS 'infinity' AS ns, TIME '24:00:00' AS t24, INTERVAL '1 month 3 days 1.5 seconds' AS iv,
  'inf'::DOUBLE AS f, '\\xAA'::BLOB AS b, '101'::BIT AS bit,
  170141183460469231731687303715884105727::HUGEINT AS h, 12345678901234567890123::VARINT AS vi,
  'a'::ENUM('a', 'b') AS e, '{"a": 1}'::JSON AS j, gen_random_uuid() AS id,
  TIMESTAMP '2020-01-01 10:00:00' AS plain"""


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("outputs")
    coord("init", cwd=folder)
    return folder


def strict_json(text: str):
    """JSON as a browser reads it: NaN and Infinity are not numbers of JSON."""
    def refuse(name: str):
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def csv_rows(home: Path, query: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(coord("sql", "-o", "csv", "-c", query, cwd=home).stdout)))


def test_csv_writes_lists_structs_and_maps_as_their_json(home):
    header, row = csv_rows(home, "SELECT [1, 2] AS l, {'a': 1} AS s, MAP {'k': 'v'} AS m")
    assert header == ["l", "s", "m"] and row == ["[1, 2]", '{"a": 1}', '[["k", "v"]]']


def test_json_writes_infinite_and_far_timestamps_and_dates_as_text(home):
    query = ("SELECT TIMESTAMP 'infinity' AS t, TIMESTAMP '-infinity' AS nt, DATE '-infinity' AS d, "
             "TIMESTAMP '50000-01-01 00:00:00' AS far, TIMESTAMPTZ 'infinity' AS tz")
    rows = strict_json(coord("sql", "-o", "json", "-c", query, cwd=home).stdout)
    assert rows == [{"t": "infinity", "nt": "-infinity", "d": "-infinity",
                     "far": "50000-01-01T00:00:00.000000", "tz": "infinity"}]


def test_csv_writes_infinite_timestamps_as_text_and_the_others_as_arrow_does(home):
    header, first, second = csv_rows(home, "SELECT * FROM (VALUES (TIMESTAMP 'infinity'), "
                                           "(TIMESTAMP '2020-01-02 03:04:05')) v(t)")
    assert (first, second) == (["infinity"], ["2020-01-02 03:04:05.000000"])


def test_a_table_shows_infinite_timestamps_and_nested_values(home):
    shown = coord("sql", "-c", "SELECT TIMESTAMP 'infinity' AS t, {'a': [1]} AS s", cwd=home).stdout
    assert "infinity" in shown and '{"a": [1]}' in shown


def test_json_writes_non_finite_floats_as_text(home):
    rows = strict_json(coord("sql", "-o", "json", "-c",
                             "SELECT 'inf'::DOUBLE AS i, '-inf'::FLOAT AS n, 'nan'::DOUBLE AS x, 1.5 AS y",
                             cwd=home).stdout)
    assert rows == [{"i": "inf", "n": "-inf", "x": "nan", "y": "1.5"}]


@pytest.mark.parametrize("output", ["table", "json", "csv"])
def test_every_output_writes_every_type_duckdb_returns(home, output):
    proc = coord("sql", "-o", output, "-c", EVERY_TYPE, cwd=home, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    if output == "json":
        row = strict_json(proc.stdout)[0]
        assert (row["t"], row["tz"], row["d"], row["ns"], row["t24"], row["iv"], row["b"]) == (
            "infinity", "-infinity", "infinity", "infinity", "24:00:00", "P1M3DT1.5S", "aa")
        assert row["s"] == {"a": 1, "b": ["infinity"]} and row["plain"] == "2020-01-01T10:00:00"


def test_parquet_keeps_infinite_timestamps_as_duckdb_stores_them(home, tmp_path):
    out = tmp_path / "t.parquet"
    coord("sql", "-o", "parquet", "--out", str(out), "-c", "SELECT TIMESTAMP 'infinity' AS t", cwd=home)
    assert pq.read_table(out).column("t").cast(pa.int64()).to_pylist() == [2**63 - 1]


def test_parquet_refuses_a_column_it_has_no_type_for_in_one_line_naming_it(home, tmp_path):
    out = tmp_path / "u.parquet"
    proc = coord("sql", "-o", "parquet", "--out", str(out), "-c",
                 "SELECT 1 AS n, INTERVAL 3 DAY AS wait", cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "column wait is month_day_nano_interval, which Parquet cannot hold" in proc.stderr
    assert not out.exists()
