"""``coord sql``: DuckDB queries over the datasets' slices, as a user runs them.

Answers are checked against pandas computing the same thing on the records the test wrote;
the datasets are real roots pulled from Parquet files (no engine needed)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.workspace import Workspace
from tests.support.cli import coord, coord_command, coord_env
from tests.support.tamper import flip_a_byte

CITIES, ORDERS = "org.example.cities", "org.example.orders"


def root_manifest(dataset: str, file: str, schema: list[str], key: str) -> str:
    return f"""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {dataset}
  source:
    kind: root
    fetch: {{kind: url, url: {file}}}
    read: {{kind: parquet, schema: {json.dumps(schema)}}}
    merge: {{kind: ledger, primaryKey: [{key}]}}
"""


def orders_frame(n: int, first_id: int = 0) -> pd.DataFrame:
    ids = range(first_id, first_id + n)
    return pd.DataFrame({"order_id": list(ids), "city": [["Oslo", "Lima", "Pune"][i % 3] for i in ids],
                         "amount": [(i * 37) % 101 for i in ids]})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Cities (pulled first) and orders (pulled after), two roots with one slice each."""
    folder = tmp_path_factory.mktemp("sql-home")
    coord("init", "--odf", "0.18", cwd=folder)
    pq.write_table(pa.table({"city": ["Oslo", "Lima"], "country": ["NO", "PE"]}), folder / "cities.parquet")
    pq.write_table(pa.Table.from_pandas(orders_frame(300), preserve_index=False), folder / "orders.parquet")
    (folder / "cities.yaml").write_text(
        root_manifest(CITIES, "cities.parquet", ["city STRING", "country STRING"], "city"))
    (folder / "orders.yaml").write_text(
        root_manifest(ORDERS, "orders.parquet", ["order_id BIGINT", "city STRING", "amount BIGINT"],
                      "order_id"))
    coord("add", "cities.yaml", "orders.yaml", cwd=folder)
    coord("pull", CITIES, cwd=folder)
    coord("pull", ORDERS, cwd=folder)
    return folder


@pytest.fixture
def home(built, tmp_path):
    """``built``, copied for the test."""
    shutil.copytree(built, tmp_path, dirs_exist_ok=True)
    return tmp_path


def sql_json(home, query: str, *args: str) -> list[dict]:
    return json.loads(coord("sql", "-o", "json", "-c", query, *args, cwd=home).stdout)


def refused(home, *args: str) -> str:
    proc = coord("sql", *args, cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def log(home, dataset: str) -> list[dict]:
    return json.loads(coord("log", dataset, "-o", "json", cwd=home).stdout)


def test_a_group_by_answers_as_pandas_computes_it(home):
    rows = sql_json(home, f'SELECT city, sum(amount) AS total, count(*) AS n FROM "{ORDERS}" '
                          "GROUP BY city ORDER BY city")
    expected = orders_frame(300).groupby("city").agg(total=("amount", "sum"), n=("amount", "size"))
    assert rows == [{"city": c, "total": int(r.total), "n": int(r.n)} for c, r in expected.iterrows()]


def test_datasets_join_by_their_names(home):
    rows = sql_json(home, f'SELECT c.country, count(*) AS n FROM "{ORDERS}" o '
                          f'JOIN "{CITIES}" c USING (city) GROUP BY 1 ORDER BY 1')
    cities = pd.DataFrame({"city": ["Oslo", "Lima"], "country": ["NO", "PE"]})
    expected = orders_frame(300).merge(cities, on="city").groupby("country").size()
    assert rows == [{"country": k, "n": int(v)} for k, v in expected.items()]


def test_a_table_reads_the_slices_its_chain_names_and_no_other_file(home):
    data = Workspace.open(home).dataset(ORDERS).root / "data"
    pq.write_table(pa.Table.from_pandas(orders_frame(5, 1000), preserve_index=False), data / "stray")
    assert sql_json(home, f'SELECT count(*) AS n FROM "{ORDERS}"') == [{"n": 300}]


def test_slices_are_read_in_chain_order(home):
    pq.write_table(pa.Table.from_pandas(orders_frame(310), preserve_index=False), home / "orders.parquet")
    coord("pull", ORDERS, cwd=home)
    ids = [r["order_id"] for r in sql_json(home, f'SELECT order_id FROM "{ORDERS}"')]
    assert ids[-10:] == list(range(300, 310)) and len(ids) == 310


def test_a_column_added_later_is_null_in_the_older_slices(home):
    (home / "cities.yaml").write_text(root_manifest(
        CITIES, "cities.parquet", ["city STRING", "country STRING", "population BIGINT"], "city"))
    coord("add", "--replace", "cities.yaml", cwd=home)
    pq.write_table(pa.table({"city": ["Oslo", "Lima", "Kyiv"], "country": ["NO", "PE", "UA"],
                             "population": [700_000, 10_000_000, 3_000_000]}), home / "cities.parquet")
    coord("pull", CITIES, cwd=home)
    assert sql_json(home, f'SELECT city, population FROM "{CITIES}"') == [
        {"city": "Oslo", "population": None}, {"city": "Lima", "population": None},
        {"city": "Kyiv", "population": 3_000_000}]


def test_as_at_a_time_reads_only_the_blocks_committed_by_then(home):
    first = log(home, ORDERS)[0]
    pq.write_table(pa.Table.from_pandas(orders_frame(310), preserve_index=False), home / "orders.parquet")
    coord("pull", ORDERS, cwd=home)
    query = f'SELECT count(*) AS n, max(order_id) AS last FROM "{ORDERS}"'
    assert sql_json(home, query) == [{"n": 310, "last": 309}]
    assert sql_json(home, query, "--as-at", first["systemTime"]) == [{"n": 300, "last": 299}]


def test_as_at_a_block_reads_its_dataset_to_it_and_the_others_as_at_its_time(home):
    cities_block = log(home, CITIES)[0]["blockHash"]
    orders_block = log(home, ORDERS)[0]["blockHash"]
    pq.write_table(pa.table({"city": ["Oslo", "Lima", "Pune"], "country": ["NO", "PE", "IN"]}),
                   home / "cities.parquet")
    coord("pull", CITIES, cwd=home)
    query = f'SELECT count(*) AS n FROM "{CITIES}"'
    assert sql_json(home, query) == [{"n": 3}]
    assert sql_json(home, query, "--as-at", orders_block[:10]) == [{"n": 2}]  # pulled before it
    error = refused(home, "-c", f'SELECT * FROM "{ORDERS}"', "--as-at", cities_block[:10])
    assert f"dataset {ORDERS} holds no data as at block {cities_block[:12]}" in error


def test_as_at_an_unknown_block_or_a_bad_time_is_refused(home):
    error = refused(home, "-c", "SELECT 1", "--as-at", "abcdef")
    assert "no block of any dataset starts with abcdef" in error
    assert "not a valid timestamp" in refused(home, "-c", "SELECT 1", "--as-at", "2020-13-01T00:00:00Z")


def test_a_bad_query_names_its_line_and_column_in_the_file(home):
    (home / "report.sql").write_text(f'SELECT 1;\n\nSELECT city,\n       amout\nFROM "{ORDERS}";\n')
    error = refused(home, "-f", "report.sql")
    assert 'report.sql: line 4, column 8: Binder Error: Referenced column "amout" not found' in error


def test_a_syntax_error_names_its_place(home):
    error = refused(home, "-c", "SELECT FROM WHERE")
    assert 'line 1, column 13: Parser Error: syntax error at or near "WHERE"' in error


def test_a_dataset_name_without_quotes_gets_a_hint(home):
    error = refused(home, "-c", f"SELECT * FROM {ORDERS}")
    assert f'a dataset is named with double quotes: FROM "{ORDERS}"' in error


@pytest.mark.parametrize("statement", [
    "COPY (SELECT 1) TO 'out.csv'", "CREATE TABLE t AS SELECT 1", "ATTACH 'other.duckdb'",
    "SET enable_external_access = true", "INSTALL httpfs", f'DELETE FROM "{ORDERS}"',
])
def test_a_statement_that_is_not_a_query_is_refused(home, statement):
    error = refused(home, "-c", f"SELECT 1;\n{statement}")
    assert "line 2, column 1:" in error and "statements are not allowed" in error
    assert not (home / "out.csv").exists() and not (home / "other.duckdb").exists()


@pytest.mark.parametrize("query, why", [
    ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error: Cannot access file"),
    ("SELECT content FROM read_text('.coord/keys/ed25519.pem')", "Permission Error: Cannot access file"),
    ("SELECT * FROM glob('/*')", "Permission Error: Cannot access file"),
    ("SELECT * FROM '/etc/passwd'", "Table with name /etc/passwd does not exist"),  # no file scan
])
def test_a_query_cannot_read_a_host_file(home, query, why):
    error = refused(home, "-c", query)
    assert why in error and "root:" not in error


def test_csv_and_parquet_outputs_hold_the_same_result(home):
    query = f'SELECT city, sum(amount) AS total FROM "{ORDERS}" GROUP BY city ORDER BY city'
    csv = coord("sql", "-o", "csv", "-c", query, cwd=home).stdout.splitlines()
    coord("sql", "-o", "parquet", "--out", "totals.parquet", "-c", query, cwd=home)
    table = pq.read_table(home / "totals.parquet")
    assert csv[0] == '"city","total"'
    assert csv[1:] == [f'"{c}",{t}' for c, t in zip(table["city"].to_pylist(), table["total"].to_pylist(),
                                                    strict=True)]
    assert table.num_rows == 3


def test_parquet_output_needs_a_file(home):
    proc = coord("sql", "-o", "parquet", "-c", "SELECT 1", cwd=home, check=False)
    assert proc.returncode == 2 and "-o parquet needs --out FILE" in proc.stderr


def test_standard_input_is_a_script(home):
    proc = subprocess.run(coord_command(["sql", "-o", "csv"]), cwd=home, env=coord_env(None),
                          input=f'SELECT count(*) AS n FROM "{CITIES}"', capture_output=True, text=True)
    assert proc.stdout.splitlines() == ['"n"', "2"]


def test_columns_named_alike_are_all_shown_under_distinct_names(home):
    query = f'SELECT c.city, o.city, o.city AS city_2 FROM "{CITIES}" c JOIN "{CITIES}" o USING (city) ' \
            "ORDER BY 1 LIMIT 1"
    assert sql_json(home, query) == [{"city": "Lima", "city_3": "Lima", "city_2": "Lima"}]
    table = coord("sql", "-c", query, cwd=home).stdout.splitlines()
    assert table[0].split() == ["city", "city_3", "city_2"] and table[1].split() == ["Lima"] * 3


def test_the_table_output_shows_at_most_max_rows(home):
    shown = coord("sql", "--max-rows", "3", "-c", f'SELECT order_id FROM "{ORDERS}"', cwd=home).stdout
    assert "(300 rows, 3 shown" in shown and len(shown.splitlines()) == 5


def test_on_a_terminal_it_is_interactive_and_an_error_does_not_end_it(home):
    """The REPL: statements end with ;, may span lines, and Ctrl-D leaves."""
    import os
    import select

    primary, secondary = os.openpty()
    plain = {"TERM": "dumb", "NO_COLOR": "1"}  # no escape codes in what is read back
    proc = subprocess.Popen(coord_command(["sql"]), cwd=home, env=coord_env(plain), stdin=secondary,
                            stdout=secondary, stderr=secondary, close_fds=True)
    os.close(secondary)
    seen = b""

    def read_until(marker: bytes, after: int = 0) -> None:
        nonlocal seen
        while marker not in seen[after:]:
            ready, _, _ = select.select([primary], [], [], 180)
            assert ready, f"no {marker!r} in {seen.decode(errors='replace')}"
            seen += os.read(primary, 65536)

    read_until(b"coord sql> ")
    os.write(primary, b"SELECT nope;\n")
    read_until(b'error: line 1, column 8: Binder Error: Referenced column "nope"')
    os.write(primary, f'SELECT count(*) AS n\nFROM "{CITIES}";\n'.encode())
    read_until(b"(1 row)")
    answer = seen.split(b"SELECT count")[-1]
    assert b"..> " in answer and re.search(rb"\bn\s+2\s+\(1 row\)", answer), answer
    # Ctrl-D only once the prompt is back: readline puts the terminal in raw mode as it asks,
    # and an end-of-file typed before that is lost in the switch.
    read_until(b"coord sql> ", after=seen.rindex(b"(1 row)"))
    os.write(primary, b"\x04")
    assert proc.wait(timeout=60) == 0
    os.close(primary)


def test_a_changed_slice_is_refused_naming_the_dataset_and_the_file(home):
    path = Workspace.open(home).dataset(ORDERS).data_files()[-1]
    flip_a_byte(path)
    error = refused(home, "-c", f'SELECT sum(amount) FROM "{ORDERS}"')
    assert error.startswith(f"coord: error: dataset {ORDERS}: refusing to read {path}: "
                            "physical hash differs from the block's")
    assert f"run coord verify {ORDERS}" in error


def slice_of(home, dataset: str):
    return Workspace.open(home).dataset(dataset).data_files()[0]


@pytest.mark.parametrize("template", [
    "EXPLAIN ANALYZE COPY (SELECT 42) TO '{path}' (FORMAT csv, USE_TMP_FILE false)",
    "/* a note */ explain analyse COPY (SELECT 42) TO '{path}' (FORMAT csv)",
    "EXPLAIN (ANALYZE, FORMAT json) COPY (SELECT 42) TO '{path}' (FORMAT csv)",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 42",
])
def test_an_explain_of_a_statement_that_is_not_a_query_is_refused_and_the_slice_is_unchanged(home, template):
    """EXPLAIN ANALYZE runs the statement it explains: that statement is checked too."""
    target = slice_of(home, ORDERS)
    before = target.read_bytes()
    error = refused(home, "-c", template.format(path=target))
    assert "line 1, column 1:" in error and "statements are not allowed (inside EXPLAIN" in error
    assert target.read_bytes() == before
    assert sql_json(home, f'SELECT count(*) AS n FROM "{ORDERS}"') == [{"n": 300}]


def test_an_explain_of_a_query_still_shows_its_plan_reading_with_duckdb_s_own_parquet_reader(home):
    query = f'EXPLAIN ANALYZE SELECT sum(amount) FROM "{ORDERS}"'
    plan = coord("sql", "-o", "csv", "-c", query, cwd=home).stdout
    assert "READ_PARQUET" in plan


def test_the_session_itself_can_write_no_file_even_when_asked_by_a_copy(home, tmp_path_factory):
    """The second wall: a COPY that got past the statement check still reaches no file, neither
    a slice nor any other place (there is no spill directory either)."""
    from coordinator.query.sql import SqlError, SqlSession, Statement

    target, elsewhere = slice_of(home, ORDERS), tmp_path_factory.mktemp("elsewhere") / "out.csv"
    before = target.read_bytes()
    with SqlSession(Workspace.open(home)) as session:
        for path in (target, elsewhere):
            text = f"COPY (SELECT 42) TO '{path}' (FORMAT csv, USE_TMP_FILE false)"
            with pytest.raises(SqlError, match="Permission Error"):
                session.query(Statement(text, "COPY", 0), text)
    assert target.read_bytes() == before and not elsewhere.exists()


@pytest.mark.parametrize("query", [
    "SELECT current_setting('allowed_paths') AS v, current_setting('allowed_directories') AS d",
    "SELECT name, value FROM duckdb_settings()",
    "SELECT sql FROM duckdb_views()",
    f'EXPLAIN SELECT * FROM "{ORDERS}" WHERE amount > 3',
    f'EXPLAIN ANALYZE SELECT * FROM "{ORDERS}" WHERE amount > 3',
])
def test_no_setting_view_or_plan_names_where_the_slices_are(home, query):
    answer = coord("sql", "-o", "json", "-c", query, cwd=home).stdout
    assert str(home) not in answer and ".parquet" not in answer and "/data/" not in answer


def test_a_slice_cut_short_is_refused_before_duckdb_reads_it(home):
    target = slice_of(home, ORDERS)
    target.write_bytes(target.read_bytes()[:-100])
    error = refused(home, "-c", f'SELECT count(*) FROM "{ORDERS}"')
    assert error.startswith(f"coord: error: dataset {ORDERS}: refusing to read {target}: ")
    assert f"run coord verify {ORDERS}" in error
