"""Error categories and the HTTP status ``coord serve`` answers each with.

The mapping by itself (every category, representative errors of each, a bug) in process; the
statuses a real request can produce against a real service over real HTTP, including the
inputs that once made it fail with a 500 (each class of them), and a real unexpected failure.
"""
from __future__ import annotations

import importlib
import pkgutil

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import coordinator
from coordinator import errors
from coordinator.build.pull import pull_datasets
from coordinator.engine.port import EngineError, EngineErrorKind, engine_error
from coordinator.engine.process import EngineStartError
from coordinator.errors import Conflict, CoordError, Invalid, NotFound, Unavailable, category
from coordinator.metadata.chain import ChainError
from coordinator.metadata.ids import DatasetRef
from coordinator.metadata.manifest import ManifestError
from coordinator.query.sql import SqlError
from coordinator.repository import add_repository, pull_from_repository, push_dataset
from coordinator.repository.registry import RepositoryExists, UnknownRepository
from coordinator.repository.remote import Diverged, SyncError
from coordinator.serve.api import _errors, status_of
from coordinator.trust.slice_check import ChangedSlice
from coordinator.workspace import ConfigError, DatasetBusy, DatasetNotFound, Workspace, layout
from coordinator.workspace.commit import HeadMoved

from .conftest import add_root, drop_csv, init_workspace, serving

# --- the mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize("error, status", [
    (NotFound("x"), 404), (Conflict("x"), 409), (Invalid("x"), 400), (Unavailable("x"), 503),
    (CoordError("x"), 400),
    (DatasetNotFound("t.x"), 404), (UnknownRepository("no repository named r"), 404),
    (DatasetBusy("t.x"), 409), (HeadMoved("head of t.x moved during the commit"), 409),
    (Diverged("diverged: ..."), 409), (RepositoryExists("repository r already exists"), 409),
    (ChangedSlice("dataset t.x: refusing to read data/ab: physical hash differs"), 409),
    (ManifestError("m.yaml", "content.id", "is required"), 400), (ConfigError("bad value"), 400),
    (SqlError("syntax error"), 400), (engine_error(EngineErrorKind.INVALID_QUERY, "no such column"), 400),
    (engine_error(EngineErrorKind.UNAVAILABLE, "engine call failed"), 503),
    (EngineStartError("no bwrap"), 503),
    (engine_error(EngineErrorKind.INTERNAL, "the engine failed"), 400), (SyncError("a file is missing"), 400),
    (ChainError(b"\0" * 32, "block is missing"), 400),
])
def test_each_category_has_its_status(error, status):
    assert status_of(error) == status


def test_an_engine_error_keeps_its_kind_whatever_its_category():
    unavailable = engine_error(EngineErrorKind.UNAVAILABLE, "gone")
    assert isinstance(unavailable, EngineError) and isinstance(unavailable, Unavailable)
    assert unavailable.kind is EngineErrorKind.UNAVAILABLE
    forbidden = engine_error(EngineErrorKind.FORBIDDEN, "no")
    assert forbidden.kind is EngineErrorKind.FORBIDDEN and category(forbidden) is Invalid


def _every_error_class() -> set[type[CoordError]]:
    for module in pkgutil.walk_packages(coordinator.__path__, "coordinator."):
        if not module.name.startswith(("coordinator.engine.generated", "coordinator.cli.__main__")):
            importlib.import_module(module.name)
    found: set[type[CoordError]] = set()
    todo = [CoordError]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_no_error_class_is_in_two_categories():
    classes = _every_error_class()
    assert len(classes) > 40  # every module's errors were imported
    for cls in classes:
        assert sum(issubclass(cls, c) for c in errors.CATEGORIES) <= 1, cls


def test_the_handlers_answer_json_with_the_categorys_status_and_a_bug_with_500():
    app = FastAPI()
    _errors(app, "/a/workspace")
    raised: dict[str, Exception] = {"gone": NotFound("no such thing"), "busy": DatasetBusy("t.x"),
                                    "bad": Invalid("bad argument"), "down": Unavailable("stopping"),
                                    "other": ChainError(b"\1" * 32, "broken"), "bug": KeyError("k")}

    @app.get("/{what}")
    def fail(what: str) -> None:
        raise raised[what]

    client = TestClient(app, raise_server_exceptions=False)
    answers = {what: client.get(f"/{what}") for what in raised}
    assert {w: r.status_code for w, r in answers.items()} == {
        "gone": 404, "busy": 409, "bad": 400, "down": 503, "other": 400, "bug": 500}
    assert answers["busy"].json() == {"error": str(DatasetBusy("t.x"))}
    assert answers["bug"].json() == {"error": "internal error: KeyError: 'k' (see the service's log)"}


# --- real requests to a real service ----------------------------------------------------------


def test_a_real_service_answers_404_409_and_400_by_category(home, tmp_path):
    # t.shared comes from a repository: the service does not update it, a pull of it conflicts
    other = Workspace.init(tmp_path / "other")
    add_root(other.root, "t.shared", "in")
    drop_csv(other.root / "in", "a.csv", [(1, "ann")])
    pull_datasets(other, ["t.shared"])
    repo = (tmp_path / "repo").as_uri()
    add_repository(other, "r", repo)
    push_dataset(other, "t.shared", "r")
    ws = Workspace.open(home)
    add_repository(ws, "r", repo)
    pull_from_repository(ws, DatasetRef.parse("r/t.shared"))
    add_root(home, "t.people", "people")
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob")])

    with serving(home, "--allow-writes") as s:
        s.wait_for(lambda: s.dataset("t.people")["records"] == 2, what="the file ingested")
        not_found = [s.get("/api/datasets/no.such"), s.post("/api/datasets/no.such/pull"),
                     s.get("/api/datasets/t.people/tail", params={"as_at": "abcdef0123"}),
                     s.get("/api/datasets/t.people/provenance", params={"block": "abcdef"})]
        assert [r.status_code for r in not_found] == [404] * 4, [r.text for r in not_found]
        assert "no block of t.people starts with abcdef" in not_found[3].json()["error"]

        conflict = s.post("/api/datasets/t.shared/pull")
        assert conflict.status_code == 409
        assert conflict.json() == {
            "error": "t.shared is pulled from a repository; the service does not update it"}

        invalid = [s.get("/api/datasets/t.people/provenance", params={"block": "abcdef", "row": 0,
                                                                       "where": "id = 1"}),
                   s.get("/api/sql", params={"q": "SELEC 1"}),
                   s.get("/api/datasets/t.people/tail", params={"as_at": "yesterday"})]
        assert [r.status_code for r in invalid] == [400] * 3, [r.text for r in invalid]
        assert invalid[0].json() == {"error": "give row or where, not both"}

        # a row is a number from 0 (422 otherwise), and several may be given
        rows = [s.get("/api/datasets/t.people/provenance", params={"block": "abcdef", "row": [0, 2]}),
                s.get("/api/datasets/t.people/provenance", params={"block": "abcdef", "row": -1})]
        assert [r.status_code for r in rows] == [404, 422], [r.text for r in rows]


# --- input that once made the service fail (500), and an unexpected failure -------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One writable service with one root, for the tests that only send bad input."""
    home = init_workspace(tmp_path_factory.mktemp("ws"))
    add_root(home, "t.people", "people")
    drop_csv(home / "people", "a.csv", [(1, "ann")])
    with serving(home, "--allow-writes") as s:
        s.wait_for(lambda: s.dataset("t.people")["records"] == 1, what="the file ingested")
        yield s


@pytest.mark.parametrize("last", [
    b"\xb2",  # '²' in Latin-1, the header's encoding: a digit to str.isdigit, not to int()
    "٣".encode(),  # '٣' (Arabic-Indic three) in UTF-8
    b"9" * 5000,  # more digits than int() converts
    b"-1",
])
def test_a_last_event_id_that_is_not_a_plain_number_is_a_400(served, last):
    r = served.get("/api/events", headers={"Last-Event-ID": last})
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("Last-Event-ID ") and "a number" in r.json()["error"]


@pytest.mark.parametrize("path, params", [
    ("/api/datasets/t.people/lineage", {"since": "٢٠٢٤-01-01T00:00:00Z"}),  # other digits
    ("/api/datasets/t.people/lineage", {"until": "9999-12-31T23:59:59-01:00"}),  # past year 9999 in UTC
    ("/api/datasets/t.people/fields/id/lineage", {"since": "0001-01-01T00:00:00+01:00"}),  # before year 1
    ("/api/datasets/t.people/tail", {"as_at": "9999-12-31T23:59:59-01:00"}),
    ("/api/sql", {"q": "SELECT 1", "as_at": "9999-12-31T23:59:59-01:00"}),
])
def test_a_timestamp_with_other_digits_or_out_of_range_is_a_400(served, path, params):
    r = served.get(path, params=params)
    assert r.status_code == 400, r.text
    assert "timestamp" in r.json()["error"]


def test_a_write_from_a_malformed_origin_is_refused_403(served):
    r = served.post("/api/datasets/t.people/pull", headers={"Origin": "http://[::1"})
    assert r.status_code == 403
    assert r.json()["error"] == ("a request from http://[::1 is refused: the API answers this service's own "
                                 "pages and programs, not other web pages")


def test_an_unexpected_failure_is_a_500_naming_it_in_one_line_and_logged_once(home):
    for dataset_id, folder in (("t.people", "people"), ("t.other", "other")):
        add_root(home, dataset_id, folder)
        # Pulled once and then idle: a pull retried after the head is broken would log its own.
        drop_csv(home / folder, "1.csv", [(1, "ann")])
    with serving(home) as s:
        s.wait_for(lambda: s.dataset("t.people")["blocks"] == s.dataset("t.other")["blocks"] == 2)
        (home / ".coord" / "datasets" / "t.people" / layout.HEAD).write_bytes(b"\xff\n")  # not text
        r = s.get("/api/datasets")
        assert s.get("/api/datasets/t.other/chain").status_code == 200  # the service goes on
        assert s.stop() == 0
        log = s.proc.stderr.read()
    assert r.status_code == 500
    assert r.json() == {"error": "internal error: UnicodeDecodeError: 'utf-8' codec can't decode byte "
                                 "0xff in position 0: invalid start byte (see the service's log)"}
    assert f"coord serve: GET /api/datasets: {r.json()['error']}" in log
    assert log.count("Traceback") == 1, log
