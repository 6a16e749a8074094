"""``coord lineage DS -o html``: the page, clicked through in a real headless Chromium.

The field lineage is written by hand into real chains (the engine derives it in practice), as
in test_field_lineage; the page is made by the real CLI and opened from its file, offline."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coordinator.lineage.page import render_lineage_page
from coordinator.metadata.objects import FieldLineage, FieldOrigin
from coordinator.workspace import Workspace
from tests.lineage.test_fields import (
    DAILY,
    DAILY_V1,
    ORDERS,
    REPORT,
    REPORT_MANIFEST,
    REPORT_V1,
    T1,
    record,
    src,
)
from tests.support.cli import MANIFESTS, coord
from tests.support.drawn import (
    boxes,
    colours_at,
    drawn_crossings,
    labels_off_their_edges,
    overlapping,
    screenshot,
    without_arrowhead,
)

# daily as a windowed aggregate over filtered orders: many edges into "every row", two of
# them (window, and window()'s own non-null filter) from the same column
CROWDED_DAILY = FieldLineage(
    fields=[FieldOrigin(field="day", sources=[src(ORDERS, "event_time", "window",
                                                  "window.end <- window(event_time)")]),
            FieldOrigin(field="total", sources=[src(ORDERS, "amount", "aggregate", "sum(amount)")])],
    conditions=[src(ORDERS, "event_time", "window", "window"),
                src(ORDERS, "event_time", "filter", "isnotnull(event_time)"),
                src(ORDERS, "status", "filter", "status = 'paid'"),
                src(ORDERS, "customer", "groupBy", "customer"),
                src(ORDERS, "order_id", "filter", "order_id > 0")],
)
DERIVATIVE_FILL = (0xea, 0xf7, 0xe6)


def lineage_page(tmp_path, daily: FieldLineage) -> Path:
    """The page for the report, written by `coord lineage -o html`, of three datasets:
    orders (a root without data) -> daily -> report, with recorded field lineage."""
    coord("init", "--odf", "0.18", cwd=tmp_path)
    (tmp_path / "report.yaml").write_text(REPORT_MANIFEST)
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), str(MANIFESTS / f"{DAILY}.yaml"), "report.yaml",
          cwd=tmp_path)
    ws = Workspace.open(tmp_path)
    record(ws, DAILY, T1, daily)
    record(ws, REPORT, T1, REPORT_V1)
    html = coord("lineage", REPORT, "-o", "html", cwd=tmp_path).stdout
    path = tmp_path / "lineage.html"
    path.write_text(html)
    return path


@pytest.fixture
def page_file(tmp_path) -> Path:
    return lineage_page(tmp_path, DAILY_V1)


@pytest.fixture
def page(browser, page_file):
    p = browser.new_page()
    requests: list[str] = []
    p.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(page_file.as_uri())
    yield p
    assert requests == [page_file.as_uri()], "the page loads nothing but itself"
    assert errors == []
    p.close()


def drawn_edges(page) -> set[tuple[str, str, str, str]]:
    """(from, to, kind, label drawn on the arrow) of every edge of the field graph."""
    return {(g.get_attribute("data-source"), g.get_attribute("data-target"), g.get_attribute("data-kind"),
             g.locator("text").text_content())
            for g in page.locator("#field-graph g.field-edge").all()}


def test_the_page_draws_the_dataset_graph(page):
    drawn = page.locator("#dataset-graph a.node").evaluate_all("gs => gs.map(g => g.dataset.dataset)")
    assert sorted(drawn) == sorted([ORDERS, DAILY, REPORT])
    links = page.locator("#dataset-graph g.link").evaluate_all(
        "gs => gs.map(g => [g.dataset.source, g.dataset.target])")
    assert sorted(map(tuple, links)) == sorted([(DAILY, REPORT), (ORDERS, DAILY)])


def test_clicking_a_dataset_shows_its_fields(page):
    page.click(f'#dataset-graph a[data-dataset="{DAILY}"]')
    assert page.locator("#fields-title").inner_text() == DAILY
    assert page.locator("button.field .name").all_inner_texts() == ["day", "total"]
    page.click(f'#dataset-graph a[data-dataset="{ORDERS}"]')  # a root without data: its read schema
    assert page.locator("button.field .name").all_inner_texts() == ["order_id", "customer", "amount",
                                                                    "placed_at"]
    assert "DECIMAL(12,2)" in page.locator('button.field[data-field="amount"]').inner_text()


def test_clicking_a_field_draws_its_lineage_back_to_the_root_with_the_operations(page):
    page.click(f'#dataset-graph a[data-dataset="{REPORT}"]')
    page.click('button.field[data-field="doubled"]')
    assert page.locator("#field-title").inner_text() == f"{REPORT}.doubled"
    assert drawn_edges(page) == {
        (f"{DAILY}.total", f"{REPORT}.doubled", "transform", "transform: total * 2"),
        (f"{ORDERS}.amount", f"{DAILY}.total", "aggregate", "aggregate: sum(amount)"),
        (f"{ORDERS}.status", f"{DAILY}.*", "filter", "filter"),
    }
    fields = page.locator("#field-graph g.node").evaluate_all("gs => gs.map(g => g.dataset.field)")
    assert sorted(fields) == sorted([f"{REPORT}.doubled", f"{DAILY}.total", f"{ORDERS}.amount",
                                     f"{ORDERS}.status", f"{DAILY}.*"])
    rows = page.locator("#field-edges-body tr").all_inner_texts()
    row = rf"{re.escape(DAILY)}\.total\s+transform total \* 2\s+{re.escape(REPORT)}\.doubled"
    assert any(re.search(row, r) for r in rows)


def test_a_dataset_node_links_to_its_section_of_the_page(page):
    page.click(f'#dataset-graph a[data-dataset="{DAILY}"]')
    assert page.evaluate("decodeURIComponent(location.hash)") == f"#dataset={DAILY}"
    assert page.locator("#fields-title").inner_text() == DAILY
    page.go_back()  # the browser's history walks the datasets shown
    assert page.locator("#fields-title").inner_text() == REPORT


def test_crowded_edge_labels_sit_on_their_own_edges_without_overlapping(browser, tmp_path):
    p = browser.new_page(viewport={"width": 1300, "height": 900})
    p.goto(lineage_page(tmp_path, CROWDED_DAILY).as_uri())
    p.click(f'#dataset-graph a[data-dataset="{REPORT}"]')
    p.click('button.field[data-field="doubled"]')
    edges = p.locator("#field-graph g.field-edge")
    assert edges.count() == 7  # doubled <- total <- amount, and daily's five conditions
    labels = boxes(p, "#field-graph text.link-label")
    nodes = boxes(p, "#field-graph g.node rect")
    assert overlapping(labels) == [] and overlapping(nodes) == []
    assert overlapping(labels + nodes) == []
    assert without_arrowhead(p, "#field-graph g.field-edge path") == []
    assert drawn_crossings(p, "#field-graph g.field-edge path") == 0
    # each label names its own edge's operation and lies on that edge's curve
    for kind, label, off in labels_off_their_edges(p, "#field-graph g.field-edge"):
        assert label.split(":")[0] == kind
        assert off <= 6, f"the label {label!r} is {off:.0f} px off its edge"
    png = screenshot(p, tmp_path / "field-lineage.png")
    node = p.locator("#dataset-graph a.node.derivative rect").first.bounding_box()
    assert colours_at(browser, png, [(node["x"] + node["width"] - 6, node["y"] + 4)]) == [DERIVATIVE_FILL]
    p.close()


def test_a_root_field_shows_every_column_computed_from_it(page):
    page.click(f'#dataset-graph a[data-dataset="{ORDERS}"]')
    page.click('button.field[data-field="amount"]')
    assert {(s, t, k) for s, t, k, _ in drawn_edges(page)} == {
        (f"{ORDERS}.amount", f"{DAILY}.total", "aggregate"),
        (f"{DAILY}.total", f"{REPORT}.doubled", "transform"),
    }


def test_a_field_without_lineage_says_so(page):
    page.click(f'#dataset-graph a[data-dataset="{ORDERS}"]')
    page.click('button.field[data-field="customer"]')
    assert page.locator("#field-none").is_visible()
    assert drawn_edges(page) == set()


def test_strings_from_the_chains_are_shown_as_text_never_run(browser, tmp_path):
    hostile = '</script><img src=x onerror="window.pwned=1">'
    places = [["a", "x", 0, 0], ["b", hostile, 1, 0]]
    x = {"name": "x", "type": "int64", "backward": [], "forward": [0], "places": places}
    y = {"name": hostile, "type": None, "backward": [0], "forward": [], "places": places}
    document = {
        "version": 1, "dataset": "a", "generated": "2030-01-01T00:00:00Z", "edges": [["a", "b"]],
        "datasets": [
            {"id": "a", "kind": "root", "records": 1, "watermark": None, "origin": hostile, "inputs": [],
             "fieldsFrom": "data", "fields": [x], "place": [0, 0]},
            {"id": "b", "kind": "derivative", "records": 1, "watermark": None, "origin": "spark",
             "inputs": ["a"], "fieldsFrom": "data", "fields": [y], "place": [1, 0]}],
        "fieldEdges": [{"source": {"dataset": "a", "field": "x"},
                        "target": {"dataset": "b", "field": hostile},
                        "kind": "transform", "expression": hostile, "version": "2030-01-01T00:00:00Z"}],
    }
    path = tmp_path / "hostile.html"
    path.write_text(render_lineage_page(document))
    p = browser.new_page()
    p.goto(path.as_uri())
    p.click('#dataset-graph a[data-dataset="a"]')
    assert hostile in p.locator("#dataset-facts").inner_text()
    p.click('button.field[data-field="x"]')
    assert p.locator("#field-graph g.field-edge").get_attribute("data-expression") == hostile
    assert p.evaluate("window.pwned") is None and p.locator("img").count() == 0
    p.close()


def test_the_document_is_embedded_as_json_the_page_reads_back(page_file):
    html = page_file.read_text()
    embedded = re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', html, re.S)
    document = json.loads(embedded.group(1))
    assert document["dataset"] == REPORT and len(document["fieldEdges"]) == 5
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
