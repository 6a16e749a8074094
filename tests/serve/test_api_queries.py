"""The API's read-only queries: a column's lineage, SQL bounded in rows and time, the lineage
page. One implementation with the CLI (``coord lineage --field -o json``, ``coord sql``)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from coordinator.metadata.objects import FieldLineage, FieldOrigin, FieldSource, MetadataBlock
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.tamper import flip_a_byte
from .conftest import Served, add_derivative, add_root, drop_csv, init_workspace, serving

PEOPLE, EMPTY, NAMES, INITIALS = "t.people", "t.empty", "t.names", "t.initials"


def record(home, dataset: str, lineage: FieldLineage) -> None:
    """Field lineage as the engine records it (written by hand: these derivatives never run)."""
    with Workspace.open(home).dataset(dataset).writer() as w:
        w.commit(MetadataBlock(system_time=datetime.now(UTC), field_lineage=lineage))


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    home = init_workspace(tmp_path_factory.mktemp("ws"))
    add_root(home, PEOPLE, "people")
    add_root(home, EMPTY, "empty")
    add_derivative(home, NAMES, [EMPTY], "SELECT event_time, upper(name) AS name FROM `t.empty`")
    add_derivative(home, INITIALS, [NAMES], "SELECT event_time, substr(name, 1, 1) AS i FROM `t.names`")
    record(home, NAMES, FieldLineage(fields=[FieldOrigin(field="name", sources=[
        FieldSource(input=EMPTY, field="name", kind="transform", expression="upper(name)")])]))
    record(home, INITIALS, FieldLineage(fields=[FieldOrigin(field="i", sources=[
        FieldSource(input=NAMES, field="name", kind="transform", expression="substr(name, 1, 1)")])]))
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob"), (3, "cid")])
    with serving(home) as s:
        s.wait_for(lambda: s.dataset(PEOPLE)["records"] == 3, what="the file ingested")
        yield s


def test_a_columns_lineage_is_what_the_cli_answers(served):
    api = served.get(f"/api/datasets/{INITIALS}/fields/i/lineage").json()
    cli = json.loads(coord("lineage", INITIALS, "--field", "i", "-o", "json", cwd=served.home).stdout)
    assert api == cli
    assert [(e["source"]["dataset"], e["source"]["field"], e["kind"]) for e in api["edges"]] == [
        (NAMES, "name", "transform"), (EMPTY, "name", "transform")]
    assert api["roots"] == {f"{EMPTY}.name": "fetched from empty/*.csv, read as csv"}


def test_forward_lineage_reaches_every_dependent_column(served):
    edges = served.get(f"/api/datasets/{EMPTY}/fields/name/lineage",
                       params={"direction": "forward"}).json()["edges"]
    targets = [(e["target"]["dataset"], e["target"]["field"]) for e in edges]
    assert targets == [(NAMES, "name"), (INITIALS, "i")]


def test_an_unknown_column_is_a_404_naming_the_known_ones(served):
    r = served.get(f"/api/datasets/{INITIALS}/fields/nope/lineage")
    assert r.status_code == 404 and "known columns: i" in r.json()["error"]


def test_sql_answers_a_query_over_the_datasets(served):
    r = served.get("/api/sql", params={"q": 'SELECT count(*) AS n, max(name) AS last FROM "t.people"'})
    assert r.json() == {"columns": ["n", "last"], "rows": [{"n": 3, "last": "cid"}], "truncated": False}


def test_sql_returns_at_most_limit_rows_and_says_so(served):
    r = served.get("/api/sql", params={"q": 'SELECT id FROM "t.people" ORDER BY id', "limit": 2}).json()
    assert (r["rows"], r["truncated"]) == ([{"id": 1}, {"id": 2}], True)


def test_sql_that_runs_too_long_is_stopped_with_a_400(served):
    slow = "SELECT sum(a.range * b.range) FROM range(200000) a, range(200000) b"
    r = served.get("/api/sql", params={"q": slow, "timeout_s": 0.5})
    assert r.status_code == 400 and "longer than 0.5 s" in r.json()["error"]


@pytest.mark.parametrize("query, message", [
    ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
    ('DELETE FROM "t.people"', "DELETE statements are not allowed"),
    ("SELECT 1; SELECT 2", "exactly one query"),
])
def test_sql_that_reads_the_host_or_writes_is_refused(served, query, message):
    r = served.get("/api/sql", params={"q": query})
    assert r.status_code == 400 and message in r.json()["error"]


def test_the_lineage_page_of_a_dataset_is_served(served):
    r = served.get(f"/lineage/{NAMES}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert INITIALS in r.text and EMPTY in r.text


def test_provenance_of_a_block_that_is_not_a_hash_is_a_422(served):
    r = served.get(f"/api/datasets/{NAMES}/provenance", params={"block": "not-hex"})
    assert r.status_code == 422 and "block" in r.json()["error"]


def test_provenance_of_an_unknown_block_is_a_404_naming_it(served):
    r = served.get(f"/api/datasets/{PEOPLE}/provenance", params={"block": "abcdef"})
    assert r.status_code == 404 and "no block of t.people starts with abcdef" in r.json()["error"]


def test_dataset_lineage_over_a_time_range_is_what_the_cli_answers(served):
    params = {"direction": "up", "since": "2000-01-01T00:00:00Z", "until": "2999-01-01T00:00:00Z"}
    api = served.get(f"/api/datasets/{INITIALS}/lineage", params=params).json()
    cli = json.loads(coord("lineage", INITIALS, "-o", "json", "--since", params["since"],
                           "--until", params["until"], cwd=served.home).stdout)
    assert api == cli and sorted(map(tuple, api["edges"])) == [(EMPTY, NAMES), (NAMES, INITIALS)]


def test_dataset_lineage_before_the_datasets_existed_has_no_edges(served):
    api = served.get(f"/api/datasets/{INITIALS}/lineage", params={"until": "2000-01-01T00:00:00Z"}).json()
    assert api["edges"] == []


def test_dataset_lineage_with_a_bad_time_is_a_400(served):
    r = served.get(f"/api/datasets/{INITIALS}/lineage", params={"since": "yesterday"})
    assert r.status_code == 400 and "yesterday" in r.json()["error"]


def test_a_changed_slice_is_refused_with_a_409_naming_it(tmp_path):
    home = init_workspace(tmp_path)
    add_root(home, PEOPLE, "people")
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob")])
    with serving(home) as s:
        s.wait_for(lambda: s.dataset(PEOPLE)["records"] == 2, what="the file ingested")
        [path] = Workspace.open(home).dataset(PEOPLE).data_files()
        flip_a_byte(path)
        for endpoint, params in [("/api/sql", {"q": f'SELECT count(*) FROM "{PEOPLE}"'}),
                                 (f"/api/datasets/{PEOPLE}/tail", {}),
                                 (f"/api/datasets/{PEOPLE}/schema", {})]:
            r = s.get(endpoint, params=params)
            assert r.status_code == 409, endpoint
            assert r.json()["error"].startswith(f"dataset {PEOPLE}: refusing to read {path}: ")
