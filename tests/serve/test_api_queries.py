"""The API's read-only queries: a column's lineage, SQL bounded in rows and time, the lineage
page. One implementation with the CLI (``coord lineage --field -o json``, ``coord sql``)."""
from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from coordinator.metadata.objects import FieldLineage, FieldOrigin, FieldSource, MetadataBlock
from coordinator.query.sandboxed import WORKER
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.processes import descendants, running
from ..support.tamper import flip_a_byte
from .conftest import Served, add_derivative, add_root, drop_csv, init_workspace, serving

PEOPLE, EMPTY, NAMES, INITIALS = "t.people", "t.empty", "t.names", "t.initials"
SQL_MAX_BYTES = 1 << 20


def record(home, dataset: str, lineage: FieldLineage) -> None:
    """Field lineage as the engine records it (written by hand: these derivatives never run)."""
    with Workspace.open(home).dataset(dataset).writer() as w:
        w.commit(MetadataBlock(system_time=datetime.now(UTC), field_lineage=lineage))


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    home = init_workspace(tmp_path_factory.mktemp("ws"),
                          f"serve: {{poll: 1h, retryMax: 1s, sqlMaxBytes: {SQL_MAX_BYTES}, "
                          "sqlConcurrency: 1}\n")
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
    assert r.json() == {"columns": ["n", "last"], "rows": [{"n": 3, "last": "cid"}], "truncated": False,
                        "truncatedBy": None}


def test_sql_posted_as_json_answers_as_the_get_does(served):
    query = {"q": 'SELECT id FROM "t.people" ORDER BY id', "limit": 2}
    assert served.post("/api/sql", json=query).json() == served.get("/api/sql", params=query).json()


def test_sql_returns_at_most_limit_rows_and_says_so(served):
    r = served.get("/api/sql", params={"q": 'SELECT id FROM "t.people" ORDER BY id', "limit": 2}).json()
    assert (r["rows"], r["truncated"], r["truncatedBy"]) == ([{"id": 1}, {"id": 2}], True, "limit")


def test_sql_asking_for_more_rows_or_time_than_the_service_gives_is_a_400(served):
    for asked, setting in (({"limit": 10_001}, "serve.sqlMaxRows"), ({"timeout_s": 31}, "serve.sqlTimeout")):
        r = served.get("/api/sql", params={"q": "SELECT 1", **asked})
        assert r.status_code == 400 and setting in r.json()["error"]


def test_sql_that_runs_too_long_is_stopped_with_a_400(served):
    slow = "SELECT sum(a.range * b.range) FROM range(200000) a, range(200000) b"
    r = served.get("/api/sql", params={"q": slow, "timeout_s": 0.5})
    assert r.status_code == 400 and "longer than 0.5 s" in r.json()["error"]


def test_sql_names_columns_named_alike_apart(served):
    answer = served.get("/api/sql", params={"q": "SELECT 1 AS n, 2 AS n"}).json()
    assert answer["columns"] == ["n", "n_2"] and answer["rows"] == [{"n": 1, "n_2": 2}]


def test_sql_answers_at_most_max_bytes_cut_at_a_whole_row_and_says_so(served):
    r = served.get("/api/sql", params={"q": "SELECT i, repeat('x', 1000) AS s FROM range(5000) t(i)",
                                       "limit": 10_000})
    answer = r.json()
    assert (answer["truncated"], answer["truncatedBy"]) == (True, "maxBytes")
    assert SQL_MAX_BYTES - 1100 < len(r.content) < SQL_MAX_BYTES + 200
    assert [row["i"] for row in answer["rows"]] == list(range(len(answer["rows"])))
    assert all(row["s"] == "x" * 1000 for row in answer["rows"])


def test_sql_that_is_slow_to_plan_is_stopped_within_its_time_limit(served):
    """DuckDB plans this 99 KB UNION ALL for 4 s (12 s on a busy machine) and does not see an
    interrupt meanwhile: the limit counts from parsing on, and the query's process is killed."""
    many = "SELECT 1 UNION ALL " * 5200 + "SELECT 1"
    served.get("/api/sql", params={"q": "SELECT 1"})  # the fork server started
    began = time.monotonic()
    r = served.post("/api/sql", json={"q": many, "timeout_s": 1})
    took = time.monotonic() - began
    assert r.status_code == 400 and "longer than 1 s" in r.json()["error"]
    assert took < 1 + 1.5, took


def sandboxes(pid: int) -> list[int]:
    """The query sandboxes (bubblewrap running the query's DuckDB) among ``pid``'s descendants."""
    found = []
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as cmdline:
                if WORKER.encode() in cmdline.read():
                    found.append(p)
        except FileNotFoundError:
            continue
    return found


def test_a_query_stopped_at_its_time_limit_leaves_no_sandbox_running(served):
    """This query keeps the sandboxed DuckDB busy for minutes past the limit: it is killed with
    the query's process, not left to finish."""
    from concurrent.futures import ThreadPoolExecutor

    slow = {"q": "SELECT count(*) FROM range(1000000000000)", "timeout_s": 2}
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(served.post, "/api/sql", json=slow)
        served.wait_for(lambda: sandboxes(served.proc.pid) != [], what="the query's sandbox started")
        started = sandboxes(served.proc.pid)  # once its parent is gone, no longer a descendant
        assert answer.result().status_code == 400
    served.wait_for(lambda: not any(running(pid) for pid in started), timeout=3,
                    what="the sandbox ended with the query's process")


def test_sql_still_answers_after_a_query_was_stopped(served):
    served.post("/api/sql", json={"q": "SELECT 1 UNION ALL " * 5200 + "SELECT 1", "timeout_s": 0.5})
    assert served.get("/api/sql", params={"q": "SELECT 42 AS n"}).json()["rows"] == [{"n": 42}]


def test_a_query_beyond_the_services_concurrency_is_a_503(served):
    from concurrent.futures import ThreadPoolExecutor

    slow = {"q": "SELECT 1 UNION ALL " * 5200 + "SELECT 1", "timeout_s": 1}  # plans past its second
    with ThreadPoolExecutor(2) as pool:  # two at once: one holds the one place a second long
        answers = sorted(pool.map(lambda _: served.post("/api/sql", json=slow), range(2)),
                         key=lambda r: r.status_code)
    assert [r.status_code for r in answers] == [400, 503]
    assert "1 queries are running (serve.sqlConcurrency)" in answers[1].json()["error"]
    assert served.get("/api/sql", params={"q": "SELECT 1"}).status_code == 200


def test_an_explain_analyze_of_a_copy_onto_a_slice_is_refused_and_the_slice_unchanged(served):
    """The attack of a read-only service: EXPLAIN ANALYZE runs the COPY it explains."""
    target = Workspace.open(served.home).dataset(PEOPLE).data_files()[0]
    before = target.read_bytes()
    attack = f"EXPLAIN ANALYZE COPY (SELECT 42) TO '{target}' (FORMAT csv, USE_TMP_FILE false)"
    r = served.get("/api/sql", params={"q": attack})
    assert r.status_code == 400 and "COPY statements are not allowed" in r.json()["error"]
    assert target.read_bytes() == before
    assert served.get("/api/sql", params={"q": 'SELECT count(*) AS n FROM "t.people"'}).json()["rows"] == [
        {"n": 3}]


def test_sql_names_no_path_of_the_workspace(served):
    query = ("SELECT current_setting('allowed_paths') AS p, current_setting('allowed_directories') AS d, "
             "current_setting('temp_directory') AS t")
    r = served.get("/api/sql", params={"q": query})
    # the one slice, as the sandbox shows it
    assert r.json()["rows"] == [{"p": ["/slices/0"], "d": [], "t": ""}]
    plan = served.get("/api/sql", params={"q": 'EXPLAIN SELECT name FROM "t.people"'}).text
    assert str(served.home) not in plan and "READ_PARQUET" in plan


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
            hidden = f"<workspace>/{path.relative_to(home)}"  # where the workspace lies is not said
            assert r.json()["error"].startswith(f"dataset {PEOPLE}: refusing to read {hidden}: "), endpoint
