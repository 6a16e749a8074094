"""``/api/sql?receipt=true``: the answer and, beside it, the signed receipt of the whole answer,
the same receipt ``coord sql --receipt`` writes (schemas/RECEIPT.md), checked by ``coord
verify-receipt``; a query a receipt cannot hold is a 400 naming why."""
from __future__ import annotations

import json

import pytest

from coordinator.workspace import Workspace

from ..support.cli import coord
from .conftest import Served, add_root, drop_csv, init_workspace, serving

PEOPLE = "t.people"
BY_ID = f'SELECT id, name FROM "{PEOPLE}" ORDER BY id'


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    home = init_workspace(tmp_path_factory.mktemp("ws"))
    add_root(home, PEOPLE, "people")
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob"), (3, "cid")])
    with serving(home) as s:
        s.wait_for(lambda: s.dataset(PEOPLE)["records"] == 3, what="the file ingested")
        yield s


def test_the_api_answers_with_a_receipt_that_verify_receipt_confirms(served, tmp_path):
    r = served.get("/api/sql", params={"q": BY_ID, "receipt": "true", "limit": 2})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["rows"] == [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}] and answer["truncated"]
    receipt = answer["receipt"]
    assert receipt["answer"]["rowCount"] == 3  # of the whole answer, whatever the limit
    assert receipt["answer"]["rows"] == [[1, "ann"], [2, "bob"], [3, "cid"]]
    assert receipt["signer"] == Workspace.open(served.home).public_key.hex()
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))

    checked = coord("verify-receipt", str(path), cwd=served.home, check=False)

    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("confirmed:")


def test_the_cli_and_the_api_give_the_same_answer_hash(served, tmp_path):
    api = served.post("/api/sql", json={"q": BY_ID, "receipt": True}).json()["receipt"]
    coord("sql", "--receipt", str(tmp_path / "cli.json"), "-c", BY_ID, cwd=served.home)
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert api["answer"] == cli["answer"] and api["inputs"] == cli["inputs"]


def test_a_query_a_receipt_cannot_hold_is_a_400_naming_why(served):
    r = served.get("/api/sql", params={"q": f'SELECT name FROM "{PEOPLE}"', "receipt": "true"})
    assert r.status_code == 400
    assert "the answer has 3 rows and the query no ORDER BY" in r.json()["error"]
    r = served.get("/api/sql", params={"q": "SELECT now() AS t", "receipt": "true"})
    assert r.status_code == 400 and "now(), which reads the clock" in r.json()["error"]


def test_without_receipt_the_answer_is_as_before(served):
    assert "receipt" not in served.get("/api/sql", params={"q": BY_ID}).json()
