"""The graph of datasets on ``coord serve``'s page, in a real headless Chromium: laid out in
layers without the crossing the datasets' names would make, an arrowhead on every edge, no two
nodes overlapping, each node a link to that dataset's lineage page.

The workspace has no data: the graph is the manifests' (no engine is started)."""
from __future__ import annotations

from coordinator.lineage.layout import crossings

from ..support.drawn import boxes, colours_at, drawn_crossings, overlapping, screenshot, without_arrowhead
from .conftest import add_derivative, add_root, serving

# in name order r.a, r.b over d.x, d.y the edges r.b->d.x and r.a->d.y cross; d.z reads both
EDGES = [("r.b", "d.x"), ("r.a", "d.y"), ("d.x", "d.z"), ("d.y", "d.z")]
NAME_ORDER = {"r.a": (0, 0), "r.b": (0, 1), "d.x": (1, 0), "d.y": (1, 1), "d.z": (2, 0)}
ROOT_FILL = (0xe8, 0xf0, 0xfe)


def crossing_workspace(home) -> None:
    add_root(home, "r.a", "a")
    add_root(home, "r.b", "b")
    add_derivative(home, "d.x", ["r.b"], "SELECT event_time, id FROM `r.b`")
    add_derivative(home, "d.y", ["r.a"], "SELECT event_time, id FROM `r.a`")
    add_derivative(home, "d.z", ["d.x", "d.y"],
                   "SELECT event_time, id FROM `d.x` UNION ALL SELECT event_time, id FROM `d.y`")


def test_the_graph_is_layered_with_arrowheads_and_each_node_opens_its_lineage_page(home, browser, tmp_path):
    crossing_workspace(home)
    assert crossings(NAME_ORDER, EDGES) == 1  # what a drawing in name order would show
    with serving(home) as served:
        page = browser.new_page()
        page.goto(served.url + "/")
        page.wait_for_function("() => document.querySelectorAll('#graph a[data-dataset]').length === 5")
        edges = page.locator("#graph path.edge")
        assert sorted(edges.evaluate_all("ps => ps.map(p => [p.dataset.source, p.dataset.target])")) == \
            sorted(map(list, EDGES))
        assert without_arrowhead(page, "#graph path.edge") == []
        assert drawn_crossings(page, "#graph path.edge") == 0
        nodes = boxes(page, "#graph a[data-dataset] rect")
        assert overlapping(nodes) == []

        root_box = page.locator('#graph a[data-dataset="r.a"] rect')
        for _ in range(5):  # the rest of the page may still move the graph as it fills in
            root = root_box.bounding_box()
            png = screenshot(page, tmp_path / "serve-graph.png")
            if root_box.bounding_box() == root:
                break
        tip = page.locator('#graph path.edge[data-target="d.z"]').first.evaluate(
            "p => { const e = p.getPointAtLength(p.getTotalLength()), r = p.getScreenCTM();"
            " return [e.x + r.e - 3, e.y + r.f]; }")
        fill, arrow = colours_at(browser, png, [(root["x"] + root["width"] - 20, root["y"] + 5), tuple(tip)])
        assert fill == ROOT_FILL  # the node is drawn, not only present in the DOM
        assert max(arrow) < 200  # the arrowhead's grey just before the edge's end, not the white page

        page.click('#graph a[data-dataset="d.z"]')
        page.wait_for_url(served.url + "/lineage/d.z")
        assert page.locator("#title").inner_text() == "d.z"
        page.close()
