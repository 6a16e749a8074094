"""How a dataset's schema may change (``data/schema_evolution.py``): a root's CSV or read schema,
or a derivative's query (DuckDB test engine), may add optional columns, each recorded by a new
SetDataSchema, the older records reading null; dropping, renaming or retyping a column is
refused in one line, before anything is written. The expected records are computed apart from
the coordinator (pyarrow's CSV reader, by hand)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from coordinator.data.odf_schema import grown_schema
from coordinator.engine import factory
from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.schema_evolution import SchemaChangeRefused
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.cli_inprocess import run_coord
from ..support.fake_engine import open_fake_engine
from ..support.manifests import csv_root_manifest, derivative_manifest, with_event_time

REMEDY = ("a schema may only gain optional columns: keep the column and add a new one, or add "
          "the changed definition as a new dataset")


def root(home: Path, schema: list[str] | None = None, name: str = "cities") -> Path:
    """A CSV root over ``in/*.csv`` (event time ``ts``); ``schema``: its read schema's entries."""
    path = home / f"{name}.yaml"
    path.write_text(csv_root_manifest(name, "in", schema))
    return path


def derivative(home: Path, query: str, name: str = "north") -> Path:
    path = home / f"{name}.yaml"
    path.write_text(with_event_time(derivative_manifest(name, ["cities"], query), "ts"))
    return path


def csv(home: Path, name: str, text: str) -> Path:
    path = home / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


DECLARED = ["id BIGINT", "ts TIMESTAMP", "city STRING"]
A = "id,ts,city\n1,2024-01-01T00:00:00Z,Oslo\n2,2024-01-02T00:00:00Z,Lima\n"
B = "id,ts,city,weather\n3,2024-01-03T00:00:00Z,Pune,warm\n"


@pytest.fixture
def home(tmp_path) -> Path:
    Workspace.init(tmp_path, OdfVersion.V039)
    return tmp_path


@pytest.fixture
def fake_engine(monkeypatch) -> None:
    """Every engine this process opens is the DuckDB test engine."""
    monkeypatch.setattr(factory, "_opener", open_fake_engine)


def schemas(home: Path, name: str) -> list[d.DataSchema]:
    state = CurrentDataset(Workspace.open(home), name).state()
    return [b.block.event.schema for b in state.blocks if isinstance(b.block.event, e.SetDataSchema)]


def sql(home: Path, query: str) -> list[dict]:
    return json.loads(run_coord(home, "sql", "-o", "json", "-c", query).output)


def pulled_root(home: Path, schema: list[str] | None = None) -> None:
    """The root ``cities`` (read schema ``schema``) added and pulled from ``A``."""
    run_coord(home, "add", str(root(home, schema)))
    csv(home, "a.csv", A)
    run_coord(home, "pull", "cities")


def head(home: Path, name: str):
    return CurrentDataset(Workspace.open(home), name).head()


# --- roots --------------------------------------------------------------------------------------


def test_a_csv_gaining_a_column_appends_a_schema_and_the_older_records_read_null(home):
    run_coord(home, "add", str(root(home)))
    files = [csv(home, "a.csv", A)]
    run_coord(home, "pull", "cities")
    files.append(csv(home, "b.csv", B))
    run_coord(home, "pull", "cities")

    first, grown = schemas(home, "cities")
    assert [f.name for f in grown.fields] == [f.name for f in first.fields] + ["weather"]
    assert grown.fields[-1].type == d.DataTypeOption(inner=d.DataTypeString())
    expected = pa.concat_tables([pacsv.read_csv(f) for f in files], promote_options="default")
    want = sorted(zip(expected["id"].to_pylist(), expected["weather"].to_pylist(), strict=True))
    got = sql(home, 'SELECT id, weather FROM "cities" ORDER BY id')
    assert [(r["id"], r["weather"]) for r in got] == want == [(1, None), (2, None), (3, "warm")]
    tail = json.loads(run_coord(home, "tail", "cities", "-o", "json").output)
    assert [(r["id"], r["weather"]) for r in tail] == want
    assert "integrity: ok" in run_coord(home, "verify", "cities").output


def test_a_column_added_to_the_read_schema_by_add_replace_is_recorded_at_the_next_pull(home):
    pulled_root(home, DECLARED)
    run_coord(home, "add", "--replace", str(root(home, [*DECLARED, "pop INT"])))
    csv(home, "b.csv", "id,ts,city,pop\n3,2024-01-03T00:00:00Z,Pune,7\n")
    run_coord(home, "pull", "cities")

    assert [f.name for f in schemas(home, "cities")[-1].fields][-1] == "pop"
    assert schemas(home, "cities")[-1].fields[-1].type == d.DataTypeOption(inner=d.DataTypeInt32())
    got = sql(home, 'SELECT id, city, pop FROM "cities" ORDER BY id')
    assert got == [{"id": 1, "city": "Oslo", "pop": None}, {"id": 2, "city": "Lima", "pop": None},
                   {"id": 3, "city": "Pune", "pop": 7}]


@pytest.mark.parametrize(("declared", "refusal"), [
    (["id STRING", "ts TIMESTAMP", "city STRING"],
     "changes column 'id' from Int64 to String"),
    (["id BIGINT", "ts TIMESTAMP"], "drops column 'city', String"),
    (["id BIGINT", "ts TIMESTAMP", "town STRING"], "drops column 'city', String"),
], ids=["retyped", "dropped", "renamed"])
def test_a_read_schema_that_changes_a_column_is_refused_at_add_and_nothing_is_written(
        home, declared, refusal):
    pulled_root(home, DECLARED)
    before = head(home, "cities")
    result = run_coord(home, "add", "--replace", str(root(home, declared)), ok=False)
    assert isinstance(result.exception, SchemaChangeRefused)
    assert str(result.exception) == f"cities: the new read schema {refusal}; {REMEDY}"
    assert head(home, "cities") == before


def test_data_whose_values_do_not_convert_to_a_columns_type_is_refused_as_a_retyping(home):
    pulled_root(home)
    before = head(home, "cities")
    csv(home, "b.csv", "id,ts,city\nx7,2024-01-03T00:00:00Z,Pune\n")
    result = run_coord(home, "pull", "cities", ok=False)
    assert result.exit_code == 1
    assert f"the new data in b.csv changes column 'id' from Int64 to String; {REMEDY}" in result.output
    assert head(home, "cities") == before


def test_before_its_first_data_a_root_has_no_schema_recorded_even_with_a_read_schema(home):
    # as the reference: its first ingest writes the first SetDataSchema, not `add`
    run_coord(home, "add", str(root(home, DECLARED)))
    assert schemas(home, "cities") == []
    # so any read schema may replace it then
    run_coord(home, "add", "--replace", str(root(home, ["id STRING", "ts TIMESTAMP"])))


def test_the_refusal_is_one_line_of_a_real_coord_process_with_exit_code_1(home):
    coord("add", str(root(home, DECLARED)), cwd=home)
    csv(home, "a.csv", A)
    coord("pull", "cities", cwd=home)
    proc = coord("add", "--replace", str(root(home, ["id STRING", "ts TIMESTAMP", "city STRING"])),
                 cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"coord: error: cities: the new read schema changes column 'id' from Int64 to String; {REMEDY}"]


# --- derivatives (the DuckDB test engine) ---------------------------------------------------------

NORTH = "SELECT ts, id, city FROM cities WHERE id <> 2"


def pulled_north(home: Path) -> None:
    """The derivative ``north`` (``NORTH``) over ``cities``, both pulled once."""
    pulled_root(home, DECLARED)
    run_coord(home, "add", str(derivative(home, NORTH)))
    run_coord(home, "pull", "-r", "north")


def test_a_query_replaced_to_output_an_extra_column_appends_a_schema_and_older_records_read_null(
        home, fake_engine):
    pulled_north(home)
    run_coord(home, "add", "--replace", str(derivative(
        home, "SELECT ts, id, city, upper(city) AS loud FROM cities WHERE id <> 2")))
    csv(home, "b.csv", "id,ts,city\n3,2024-01-03T00:00:00Z,Pune\n4,2024-01-04T00:00:00Z,Kyiv\n")
    run_coord(home, "pull", "-r", "north")

    grown = schemas(home, "north")[-1]
    assert grown.fields[-1] == d.DataField(name="loud", type=d.DataTypeOption(inner=d.DataTypeString()))
    got = sql(home, 'SELECT id, loud FROM "north" ORDER BY id')
    assert got == [{"id": 1, "loud": None}, {"id": 3, "loud": "PUNE"}, {"id": 4, "loud": "KYIV"}]
    # each step replays under the query and schema of its time
    assert "reproducibility: reproduced" in run_coord(home, "verify", "north").output


def test_a_query_replaced_to_drop_a_column_is_refused_at_add_and_the_old_query_stays(
        home, fake_engine):
    pulled_north(home)
    before = head(home, "north")
    result = run_coord(home, "add", "--replace",
                       str(derivative(home, "SELECT ts, id FROM cities WHERE id <> 2")), ok=False)
    assert str(result.exception) == f"north: the new query drops column 'city', String; {REMEDY}"
    assert head(home, "north") == before


def test_a_0_18_query_change_is_refused_by_the_same_rule(tmp_path, fake_engine):
    Workspace.init(tmp_path)  # ODF 0.18
    run_coord(tmp_path, "add", str(root(tmp_path, DECLARED)))
    csv(tmp_path, "a.csv", A)
    run_coord(tmp_path, "add", str(derivative(tmp_path, NORTH)))
    run_coord(tmp_path, "pull", "-r", "north")
    result = run_coord(tmp_path, "add", "--replace",
                       str(derivative(tmp_path, "SELECT ts, id FROM cities")), ok=False)
    assert str(result.exception) == f"north: the new query drops column 'city', String; {REMEDY}"


# --- nullability: a column keeps the one recorded first -----------------------------------------


def stored(**columns: tuple[pa.DataType, bool, list]) -> pa.Table:
    """A stored table: column name -> (type, nullable, values)."""
    fields = [pa.field(n, t, nullable) for n, (t, nullable, _) in columns.items()]
    return pa.table({n: v for n, (_, _, v) in columns.items()}, schema=pa.schema(fields))


def schema(**columns: tuple[d.DataType, bool]) -> d.DataSchema:
    return d.DataSchema(fields=[d.DataField(name=n, type=d.DataTypeOption(inner=t) if nullable else t)
                                for n, (t, nullable) in columns.items()])


def test_a_new_column_the_data_has_as_required_is_recorded_optional():
    table, grown = grown_schema("t", stored(a=(pa.int64(), False, [1]), b=(pa.int64(), False, [2])),
                                schema(a=(d.DataTypeInt64(), False)), "the new data")
    assert grown == schema(a=(d.DataTypeInt64(), False), b=(d.DataTypeInt64(), True))
    assert table.schema.field("b").nullable


def test_a_column_recorded_optional_stays_optional_when_the_data_has_it_required():
    in_force = schema(a=(d.DataTypeInt64(), True))
    table, grown = grown_schema("t", stored(a=(pa.int64(), False, [1])), in_force, "the new data")
    assert grown is None and table.schema.field("a").nullable


def test_a_required_column_stays_required_while_its_values_hold_no_null():
    in_force = schema(a=(d.DataTypeInt64(), False))
    table, grown = grown_schema("t", stored(a=(pa.int64(), True, [1])), in_force, "the new data")
    assert grown is None and not table.schema.field("a").nullable
    with pytest.raises(SchemaChangeRefused, match=r"^t: the new data changes column 'a' from Int64 "
                                                  r"\(required\) to Int64 \(optional\); "):
        grown_schema("t", stored(a=(pa.int64(), True, [None])), in_force, "the new data")
