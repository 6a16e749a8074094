"""``GET /api/datasets/DS/diff``: the answer of ``coord diff -o json``, bounded in rows as the
API's other answers are, refusals a 4xx naming the parameter."""
from __future__ import annotations

import json

import pytest

from ..query.test_diff import AIRPORTS, SEEN, data_blocks
from ..support.cli import coord
from .conftest import Served


@pytest.fixture(scope="module")
def served(snapshots_served) -> Served:
    return snapshots_served


def cli_json(served: Served, *args: str) -> dict:
    return json.loads(coord("diff", *args, "-o", "json", cwd=served.home).stdout)


def test_the_answer_is_the_clis_json(served):
    blocks = data_blocks(served.home, AIRPORTS)
    api = served.get(f"/api/datasets/{AIRPORTS}/diff", params={"from": blocks[0], "to": blocks[-1]})
    assert api.status_code == 200, api.text
    assert api.json() == cli_json(served, AIRPORTS, "--from", blocks[0], "--to", blocks[-1])
    assert api.json()["truncated"] is False


def test_without_versions_it_is_the_last_change_as_the_cli_says(served):
    assert served.get(f"/api/datasets/{AIRPORTS}/diff").json() == cli_json(served, AIRPORTS)


def test_the_rows_are_cut_at_the_limit_and_the_counts_are_of_all(served):
    first = data_blocks(served.home, AIRPORTS)[0]
    answer = served.get(f"/api/datasets/{AIRPORTS}/diff",
                        params={"from": "2000-01-01T00:00:00Z", "to": first, "limit": 2}).json()
    assert (answer["added"], len(answer["rows"]), answer["truncatedBy"]) == (4, 2, "limit")


def test_an_unknown_block_is_a_404_naming_the_parameter(served):
    r = served.get(f"/api/datasets/{AIRPORTS}/diff", params={"from": "abcdef0123"})
    assert r.status_code == 404
    assert r.json()["error"].startswith(f"from abcdef0123: no block of {AIRPORTS} starts with abcdef0123")


def test_as_of_a_dataset_without_a_key_is_a_400(served):
    r = served.get(f"/api/datasets/{SEEN}/diff", params={"to_as_of": "2020-01-15T00:00:00Z"})
    assert r.status_code == 400
    assert r.json()["error"].startswith(f"to_as_of: dataset {SEEN} has no state")


def test_a_version_neither_block_nor_time_is_a_400_naming_the_parameter(served):
    r = served.get(f"/api/datasets/{AIRPORTS}/diff", params={"to": "yesterday"})
    assert r.status_code == 400
    assert r.json()["error"] == ("to yesterday: neither a block (hex digits, as coord log shows them) "
                                 "nor an RFC 3339 time (e.g. 2024-01-01T00:00:00Z)")


def test_an_event_time_that_is_no_time_is_a_400_naming_the_parameter(served):
    r = served.get(f"/api/datasets/{AIRPORTS}/diff", params={"from_as_of": "2020-02-30T00:00:00Z"})
    assert r.status_code == 400
    assert r.json()["error"] == ("from_as_of 2020-02-30T00:00:00Z: not an RFC 3339 time "
                                 "(e.g. 2024-01-01T00:00:00Z)")


def test_a_limit_beyond_the_services_bound_is_a_400_and_below_one_a_422(served):
    over = served.get(f"/api/datasets/{AIRPORTS}/diff", params={"limit": 10**9})
    assert over.status_code == 400
    assert over.json()["error"].startswith("limit: at most ")
    none = served.get(f"/api/datasets/{AIRPORTS}/diff", params={"limit": 0})
    assert none.status_code == 422
    assert none.json()["error"].startswith("query limit: ")
