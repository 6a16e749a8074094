"""What ``coord add`` keeps of a current-ODF derivative's ``transform.lateRows``, which a 0.39
chain has no place for: the manifest's policy, ``correct`` when it names none; a derivative
with none kept (added before corrections, or pulled) drops late rows until its manifest is
added again with ``--replace``. An ODF 0.18 workspace refuses ``correct``."""
from __future__ import annotations

import json

from coordinator.metadata.objects import LateRows
from coordinator.store.late_rows import late_rows_policy
from coordinator.workspace import Workspace
from coordinator.workspace import layout as ws_layout
from coordinator.workspace.config import OdfVersion
from tests.support.cli import coord_here
from tests.support.manifests import csv_root_manifest, derivative_manifest
from tests.support.odf39_datasets import write_root

QUERY = "SELECT event_time, count(*) AS n FROM cities GROUP BY window(event_time, '1 day')"


def workspace(tmp_path) -> Workspace:
    ws = Workspace.init(tmp_path, OdfVersion.V039)
    write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch")
    return ws


def add(tmp_path, name: str, late_rows: str | None = None, *args: str, check: bool = True):
    manifest = derivative_manifest(name, ["cities"], QUERY)
    if late_rows is not None:
        manifest = manifest.replace("engine: spark,", f"engine: spark, lateRows: {late_rows},")
    (tmp_path / f"{name}.yaml").write_text(manifest)
    return coord_here("add", f"{name}.yaml", *args, cwd=tmp_path, check=check)


def test_a_new_derivative_corrects_late_rows_unless_its_manifest_says_otherwise(tmp_path):
    ws = workspace(tmp_path)
    add(tmp_path, "daily")
    add(tmp_path, "daily-drop", "drop")
    add(tmp_path, "daily-fail", "fail")
    assert [late_rows_policy(ws, n) for n in ("daily", "daily-drop", "daily-fail")] == \
        [LateRows.CORRECT, LateRows.DROP, LateRows.FAIL]


def test_a_derivative_with_no_policy_kept_drops_until_added_again_with_replace(tmp_path):
    ws = workspace(tmp_path)
    add(tmp_path, "daily")
    (ws.meta / ws_layout.cache_dir("daily", ws_layout.LATE_ROWS)).unlink()  # as added before
    assert late_rows_policy(ws, "daily") is LateRows.DROP
    head = coord_here("log", "daily", "-o", "json", cwd=tmp_path).stdout
    out = add(tmp_path, "daily", None, "--replace").stdout
    assert out.startswith("updated   daily")
    assert late_rows_policy(ws, "daily") is LateRows.CORRECT
    assert coord_here("log", "daily", "-o", "json", cwd=tmp_path).stdout == head  # no new block
    assert add(tmp_path, "daily", None, "--replace").stdout.startswith("unchanged daily")


def test_an_odf_018_workspace_refuses_correct_in_one_line(tmp_path):
    Workspace.init(tmp_path, OdfVersion.V018)
    (tmp_path / "cities.yaml").write_text(csv_root_manifest("cities", "in", ["ts TIMESTAMP", "n BIGINT"]))
    coord_here("add", "cities.yaml", cwd=tmp_path)
    refused = add(tmp_path, "daily", "correct", check=False)
    assert refused.returncode == 1
    assert refused.stderr == ("coord: error: daily.yaml: content.source.transform.lateRows: correct is "
                              "for current-ODF datasets, which are recomputed when rows arrive late; "
                              "an ODF 0.18 dataset takes drop or fail\n")
    assert not (tmp_path / ".coord" / "datasets" / "daily").exists()


def test_status_says_a_derivative_added_before_corrections_drops_late_rows(tmp_path):
    ws = workspace(tmp_path)
    add(tmp_path, "daily")
    add(tmp_path, "daily-before")
    (ws.meta / ws_layout.cache_dir("daily-before", ws_layout.LATE_ROWS)).unlink()  # as added before
    status = {s["id"]: s for s in json.loads(coord_here("status", "-o", "json", cwd=tmp_path).stdout)}
    assert status["daily"]["lateRowsPolicy"] == "correct"
    assert "drops rows that arrive late" not in status["daily"]["words"]
    assert status["daily-before"]["lateRowsPolicy"] == "drop"
    assert status["daily-before"]["words"].endswith(
        "; it drops rows that arrive late (added before corrections: coord add --replace its "
        "manifest to have them correct its results)")
