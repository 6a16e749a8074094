"""The lineage page of a current-ODF (0.39) workspace shows each dataset's fields and their
lineage, as for ODF 0.18 (``test_page.py``): made by ``coord lineage -o html`` and clicked
through in a real headless Chromium.

The derivative is ``large-cities`` over the root ``cities`` (``support.odf39_datasets``); its
field lineage is written by hand beside its chain (``store.field_lineage``), as the engine
records it, read off its query: ``SELECT event_time, city, population FROM cities WHERE
population > 1000000``."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coordinator.metadata.objects import FieldLineage, FieldOrigin, FieldSource
from coordinator.metadata.odf39.events import ExecuteTransform
from coordinator.store.dataset import CurrentDataset
from coordinator.store.field_lineage import record_version
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord
from ..support.odf39_datasets import write_derivative, write_root

ROOT, DER = "cities", "large-cities"
LINEAGE = FieldLineage(
    fields=[FieldOrigin(field=f, sources=[FieldSource(input=ROOT, field=f, kind="copy")])
            for f in ("event_time", "city", "population")],
    conditions=[FieldSource(input=ROOT, field="population", kind="filter",
                            expression="population > 1000000")])


def current_pipeline(home: Path) -> Workspace:
    """A 0.39 workspace in ``home``: ``cities`` and ``large-cities`` with its field lineage."""
    ws = Workspace.init(home, OdfVersion.V039)
    folder, locks, scratch = ws.meta / "datasets", ws.meta / "locks", home / "scratch"
    write_derivative(folder / DER, locks, scratch, write_root(folder / ROOT, locks, scratch))
    ds = CurrentDataset(ws, DER)
    state = ds.state()
    first = next(b for b in state.blocks if isinstance(b.block.event, ExecuteTransform))
    record_version(ds, state, first.hash, LINEAGE)
    return ws


def embedded(html: str) -> dict:
    """The document a lineage page carries (what its script reads)."""
    found = re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("current-page")
    current_pipeline(home)
    path = home / "lineage.html"
    path.write_text(coord("lineage", DER, "-o", "html", cwd=home).stdout)
    return path


def test_the_html_carries_each_datasets_fields_and_their_lineage(page_file):
    document = embedded(page_file.read_text())
    by_id = {d["id"]: d for d in document["datasets"]}
    assert [f["name"] for f in by_id[DER]["fields"]] == [
        "offset", "op", "system_time", "event_time", "city", "population"]
    population = next(f for f in by_id[DER]["fields"] if f["name"] == "population")
    edges = [document["fieldEdges"][i] for i in population["backward"]]
    assert {(e["source"]["dataset"], e["source"]["field"], e["target"]["field"], e["kind"])
            for e in edges} == {(ROOT, "population", "population", "copy"),
                                (ROOT, "population", None, "filter")}
    root_population = next(f for f in by_id[ROOT]["fields"] if f["name"] == "population")
    assert root_population["forward"]  # the root's column leads to the derivative's


@pytest.fixture
def page(browser, page_file):
    p = browser.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(page_file.as_uri())
    yield p
    assert errors == []
    p.close()


def test_clicking_the_derivative_lists_its_fields(page):
    page.click(f'#dataset-graph a[data-dataset="{DER}"]')
    assert page.locator("#fields-title").inner_text() == DER
    assert page.locator("button.field .name").all_inner_texts() == [
        "offset", "op", "system_time", "event_time", "city", "population"]
    assert not page.locator("#fields li.hint").count()  # no "No fields known."


def test_clicking_a_field_draws_its_lineage_back_to_the_root(page):
    page.click(f'#dataset-graph a[data-dataset="{DER}"]')
    page.click('button.field[data-field="city"]')
    assert page.locator("#field-title").inner_text() == f"{DER}.city"
    drawn = {(g.get_attribute("data-source"), g.get_attribute("data-target"), g.get_attribute("data-kind"))
             for g in page.locator("#field-graph g.field-edge").all()}
    # the rows every field of it holds are decided by the filter on the root's population
    assert drawn == {(f"{ROOT}.city", f"{DER}.city", "copy"),
                     (f"{ROOT}.population", f"{DER}.*", "filter")}
