"""The HTTP API of ``coord serve``, against a real service over real HTTP.

Roots only (no engine): ``t.people`` ingests CSV files; ``t.empty`` has no file yet, so it
fails (and is retried) while the others go on; ``t.names`` reads it and ``t.initials`` reads
``t.names``: both wait for data, which keeps Spark out of these tests while the lineage is
three deep.
"""
from __future__ import annotations

import csv

import pyarrow.parquet as pq
import pytest

from coordinator.workspace import Workspace

from .conftest import Served, add_derivative, add_root, drop_csv, init_workspace, serving, sse_events

PEOPLE, EMPTY, NAMES, INITIALS = "t.people", "t.empty", "t.names", "t.initials"


def workspace_of_four(home):
    add_root(home, PEOPLE, "people")
    add_root(home, EMPTY, "empty")
    add_derivative(home, NAMES, [EMPTY], "SELECT event_time, name FROM `t.empty`")
    add_derivative(home, INITIALS, [NAMES], "SELECT event_time, substr(name, 1, 1) AS i FROM `t.names`")
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob")])
    with serving(home) as s:
        s.wait_for(lambda: s.dataset(PEOPLE)["records"] == 2, what="the first file ingested")
        yield s


@pytest.fixture
def served(home) -> Served:
    """A service of its own, for a test that drops files."""
    yield from workspace_of_four(home)


@pytest.fixture(scope="module")
def read_only(tmp_path_factory) -> Served:
    """One service for the tests that only read."""
    yield from workspace_of_four(init_workspace(tmp_path_factory.mktemp("ws")))


def csv_rows(*paths) -> list[dict]:
    return [{"id": int(r["id"]), "name": r["name"]} for p in paths for r in csv.DictReader(open(p))]


def test_the_list_has_every_dataset_with_kind_head_records_and_status(read_only):
    listed = {d["id"]: d for d in read_only.get("/api/datasets").json()}
    assert sorted(listed) == sorted([PEOPLE, EMPTY, NAMES, INITIALS])
    people = listed[PEOPLE]
    ws = Workspace.open(read_only.home)
    assert people["head"] == ws.dataset(PEOPLE).head().hex()
    assert (people["kind"], people["records"], people["outOfDate"]) == ("root", 2, False)
    assert people["watermark"] is not None and people["lastError"] is None
    assert listed[NAMES]["reasons"] == ["waiting for input data"]


def test_tail_returns_the_records_of_the_dropped_files(served):
    drop_csv(served.home / "people", "b.csv", [(3, "cid")])
    served.wait_for(lambda: served.dataset(PEOPLE)["records"] == 3)
    records = served.get(f"/api/datasets/{PEOPLE}/tail", params={"n": 100}).json()["records"]
    expected = csv_rows(served.home / "people" / "a.csv", served.home / "people" / "b.csv")
    assert [{"id": r["id"], "name": r["name"]} for r in records] == expected


def test_tail_as_at_gives_the_records_held_at_that_block(served):
    first_head = served.dataset(PEOPLE)["head"]
    drop_csv(served.home / "people", "b.csv", [(3, "cid")])
    served.wait_for(lambda: served.dataset(PEOPLE)["records"] == 3)
    records = served.get(f"/api/datasets/{PEOPLE}/tail", params={"n": 100, "as_at": first_head}).json()
    assert [r["id"] for r in records["records"]] == [1, 2]


def test_the_chain_is_paged_newest_block_first(read_only):
    hashes = [h.hex() for h, _ in Workspace.open(read_only.home).dataset(PEOPLE).blocks()]
    first = read_only.get(f"/api/datasets/{PEOPLE}/chain", params={"limit": 1}).json()
    second = read_only.get(f"/api/datasets/{PEOPLE}/chain", params={"limit": 1, "offset": 1}).json()
    assert first["total"] == len(hashes) == 2
    assert [b["hash"] for b in first["blocks"] + second["blocks"]] == hashes
    assert "source" in second["blocks"][0]["block"]  # the oldest block defines the dataset
    own = Workspace.open(read_only.home).public_key.hex()
    assert {(b["signer"], b["authorship"]) for b in first["blocks"] + second["blocks"]} == {(own, "trusted")}


def test_schema_lists_the_columns_of_the_data(read_only):
    columns = read_only.get(f"/api/datasets/{PEOPLE}/schema").json()["columns"]
    data_file = Workspace.open(read_only.home).dataset(PEOPLE).data_files()[-1]
    assert columns == [{"name": f.name, "type": str(f.type)} for f in pq.read_schema(data_file)]
    assert [c["name"] for c in columns][-2:] == ["id", "name"]


def test_lineage_follows_inputs_as_deep_as_asked(read_only):
    def upstream(**params) -> set[str]:
        body = read_only.get(f"/api/datasets/{INITIALS}/lineage", params=params).json()
        return {n["id"] for n in body["nodes"]}

    assert upstream(depth=1) == {INITIALS, NAMES}
    assert upstream(depth=2) == upstream() == {INITIALS, NAMES, EMPTY}
    down = read_only.get(f"/api/datasets/{EMPTY}/lineage", params={"direction": "down"}).json()
    assert sorted(map(tuple, down["edges"])) == [(EMPTY, NAMES), (NAMES, INITIALS)]


def test_the_whole_graph_has_every_edge(read_only):
    graph = read_only.get("/api/graph").json()
    assert graph["edges"] == [[EMPTY, NAMES], [NAMES, INITIALS]]
    assert {n["id"]: n["kind"] for n in graph["nodes"]}[PEOPLE] == "root"


@pytest.mark.parametrize("path, params, status", [
    (f"/api/datasets/{PEOPLE}/tail", {"n": 0}, 422),
    (f"/api/datasets/{PEOPLE}/tail", {"n": "many"}, 422),
    (f"/api/datasets/{PEOPLE}/tail", {"as_at": "yesterday"}, 400),
    (f"/api/datasets/{PEOPLE}/tail", {"as_at": "abcdef0123"}, 404),  # no such block
    (f"/api/datasets/{PEOPLE}/chain", {"limit": 5000}, 422),
    (f"/api/datasets/{PEOPLE}/chain", {"offset": -1}, 422),
    (f"/api/datasets/{PEOPLE}/lineage", {"direction": "sideways"}, 422),
    (f"/api/datasets/{PEOPLE}/lineage", {"depth": 0}, 422),
    ("/api/datasets/no.such.dataset", {}, 404),
    ("/api/datasets/not..an..id/chain", {}, 400),
    ("/api/nothing-here", {}, 404),
])
def test_bad_requests_get_a_4xx_with_a_json_message(read_only, path, params, status):
    r = read_only.get(path, params=params)
    assert r.status_code == status
    message = r.json().get("error") or r.json().get("detail")
    assert message and "Traceback" not in r.text


def test_a_pull_request_is_refused_when_the_service_is_read_only(read_only):
    r = read_only.post(f"/api/datasets/{PEOPLE}/pull")
    assert r.status_code == 403 and "--allow-writes" in r.json()["error"]


@pytest.mark.spark  # the retried root's file wakes its derivatives
def test_a_dataset_whose_source_fails_shows_its_error_and_is_retried(served):
    def error() -> dict | None:
        return served.dataset(EMPTY)["lastError"]

    served.wait_for(lambda: error() is not None and error()["attempts"] >= 2, what="two attempts")
    assert "no files match" in error()["message"] and served.dataset(EMPTY)["state"] == "failed"
    drop_csv(served.home / "people", "b.csv", [(3, "cid")])  # the others go on meanwhile
    served.wait_for(lambda: served.dataset(PEOPLE)["records"] == 3)
    drop_csv(served.home / "empty", "a.csv", [(9, "zed")])
    seen: list[dict] = []
    served.wait_for(lambda: seen.append(served.dataset(EMPTY)) or seen[-1]["records"] == 1,
                    what="the retry once the file is there")
    assert seen[-1]["lastError"] is None  # the same answer: the new record comes with the error cleared


def test_a_dropped_file_is_committed_within_about_a_second(served):
    # roots are polled hourly here: only the folder watcher can see the file this soon
    drop_csv(served.home / "people", "b.csv", [(3, "cid")])
    seconds = served.wait_for(lambda: served.dataset(PEOPLE)["records"] == 3, timeout=10)
    assert seconds < 3  # about 0.2 s on an idle machine; the bound leaves room for a busy one


def test_the_event_stream_announces_each_commit(served):
    drop_csv(served.home / "people", "b.csv", [(3, "cid")])
    events = sse_events(served, lambda es: any(e["kind"] == "commit" and e["records"] == 3 for e in es))
    commit = next(e for e in events if e["kind"] == "commit" and e["records"] == 3)
    assert commit["dataset"] == PEOPLE
    assert commit["head"] == Workspace.open(served.home).dataset(PEOPLE).head().hex()


def test_the_page_is_self_contained(read_only):
    page = read_only.get("/")
    assert page.status_code == 200 and "EventSource" in page.text
    assert "src=" not in page.text and "href=" not in page.text  # no script, style or font from elsewhere


def test_the_openapi_page_documents_the_api(read_only):
    spec = read_only.get("/openapi.json").json()
    assert {"/api/datasets", "/api/datasets/{dataset_id}/tail", "/api/events"} <= set(spec["paths"])
    assert read_only.get("/docs").status_code == 200
