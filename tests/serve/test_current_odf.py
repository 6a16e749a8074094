"""``coord serve`` on a workspace holding datasets of both ODF versions: it starts, lists and
draws both, and its build service ingests a current-ODF (0.39) root and computes the 0.39
derivative over it (through the DuckDB test engine), as it does for 0.18 ones. The workspace
is set up by commands run in the test process (``coord_here``); ``coord serve`` is a process."""
from __future__ import annotations

import textwrap

from ..support.cli import coord_here
from ..support.engines import ENV
from .conftest import add_root, drop_csv, init_workspace, serving

ROOT = """\
    apiVersion: 1
    kind: DatasetSnapshot
    content:
      id: cities
      source:
        kind: root
        fetch: {kind: filesGlob, path: "new-in/*.csv"}
        read: {kind: csv, header: true, schema: ["id BIGINT", "name STRING"]}
        merge: {kind: append}
    """
ODD = """\
    apiVersion: 1
    kind: DatasetSnapshot
    content:
      id: odd
      source:
        kind: derivative
        inputs: [cities]
        transform: {kind: sql, engine: spark, query: "SELECT * FROM cities WHERE id % 2 = 1"}
    """


def test_serve_lists_draws_and_builds_datasets_of_both_versions(tmp_path):
    home = init_workspace(tmp_path)  # ODF 0.18
    add_root(home, "old", "old-in")
    drop_csv(home / "old-in", "a.csv", [(1, "x")])
    coord_here("config", "set", "odf", "0.39", cwd=home)  # new datasets from here on: current ODF
    (home / "new-in").mkdir()
    drop_csv(home / "new-in", "a.csv", [(1, "a"), (2, "b"), (3, "c")])
    for name, text in (("cities", ROOT), ("odd", ODD)):
        (home / f"{name}.yaml").write_text(textwrap.dedent(text))
        coord_here("add", str(home / f"{name}.yaml"), cwd=home)

    with serving(home, env={ENV: "fake"}) as served:
        served.wait_for(lambda: served.dataset("odd")["records"] == 2, what="odd computed")
        listed = {d["id"]: d for d in served.get("/api/datasets").json()}
        assert {d: (v["odf"], v["kind"]) for d, v in listed.items()} == {
            "old": ("0.18", "root"), "cities": ("0.39", "root"), "odd": ("0.39", "derivative")}
        assert listed["cities"]["records"] == 3 and listed["cities"]["head"].startswith("f1620")
        graph = served.get("/api/graph").json()
        assert ["cities", "odd"] in graph["edges"]
        assert {n["id"]: n["kind"] for n in graph["nodes"]}["odd"] == "derivative"
        rows = served.get("/api/sql", params={"q": "SELECT id FROM odd ORDER BY id"}).json()["rows"]
        assert rows == [{"id": 1}, {"id": 3}]
        chain = served.get("/api/datasets/cities/chain", params={"limit": 2}).json()
        assert chain["total"] == 4 and [b["block"]["event"]["kind"] for b in chain["blocks"]] == [
            "AddData", "SetDataSchema"]
        assert chain["blocks"][0]["hash"] == listed["cities"]["head"]
        assert chain["blocks"][0]["authorship"] == "trusted"
        schema = served.get("/api/datasets/odd/schema").json()
        assert [c["name"] for c in schema["columns"]] == [
            "offset", "op", "system_time", "event_time", "id", "name"]
