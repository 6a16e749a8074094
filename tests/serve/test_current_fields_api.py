"""``coord serve`` of a current-ODF (0.39) workspace answers a column's lineage as the CLI does
(``/api/datasets/DS/fields/F/lineage``), and its lineage page (``/lineage/DS``) carries each
dataset's fields with their lineage, as for ODF 0.18 (``test_api_queries.py``). The pipeline
and its hand-written field lineage are ``tests/lineage/test_current_fields_page.py``'s."""
from __future__ import annotations

import json

import pytest

from ..lineage.test_current_fields_page import DER, ROOT, current_pipeline, embedded
from ..support.cli import coord
from ..support.engines import ENV
from .conftest import Served, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    home = tmp_path_factory.mktemp("current-api")
    ws = current_pipeline(home)
    config = ws.meta / "config.yaml"
    config.write_text(config.read_text() + "serve: {poll: 1h, retryMax: 1s}\n")
    with serving(home, env={ENV: "fake"}) as s:
        yield s


def test_a_columns_lineage_is_what_the_cli_answers(served):
    api = served.get(f"/api/datasets/{DER}/fields/population/lineage").json()
    cli = json.loads(coord("lineage", DER, "--field", "population", "-o", "json", cwd=served.home).stdout)
    assert api == cli
    assert {(e["source"]["dataset"], e["source"]["field"], e["kind"]) for e in api["edges"]} == {
        (ROOT, "population", "copy"), (ROOT, "population", "filter")}
    assert api["roots"] == {f"{ROOT}.population": "fetched from https://example.org/cities.csv, read as Csv"}


def test_forward_lineage_of_a_root_column_reaches_the_derivative(served):
    edges = served.get(f"/api/datasets/{ROOT}/fields/city/lineage",
                       params={"direction": "forward"}).json()["edges"]
    assert [(e["target"]["dataset"], e["target"]["field"]) for e in edges] == [(DER, "city")]


def test_the_served_page_carries_the_fields_of_each_dataset(served):
    document = embedded(served.get(f"/lineage/{DER}").text)
    by_id = {d["id"]: d for d in document["datasets"]}
    assert {d: [f["name"] for f in v["fields"]][3:] for d, v in by_id.items()} == {
        DER: ["event_time", "city", "population"], ROOT: ["event_time", "city", "population"]}
    city = next(f for f in by_id[DER]["fields"] if f["name"] == "city")
    assert {(document["fieldEdges"][i]["source"]["field"], document["fieldEdges"][i]["kind"])
            for i in city["backward"]} == {("city", "copy"), ("population", "filter")}
