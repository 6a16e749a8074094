"""``coord verify --invariance`` and ``--engine`` on a current-ODF (0.39) derivative, through the
real ``coord`` with the DuckDB test engine (tests/support/fake_engine.py); the records each
report speaks of are computed again with pyarrow from the input's records."""
from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.odf39_datasets import Written, append_rows, write_derivative
from ..transform import test_current_pull as current_pull

defined = current_pull.defined  # built once for the module


@pytest.fixture
def ws(defined, tmp_path) -> Workspace:
    """The root ``cities`` and the derivative ``large`` (QUERY over it), not pulled yet."""
    return current_pull.copy_of(defined, tmp_path)


MORE, QUERY, change_query, records = current_pull.MORE, current_pull.QUERY, current_pull.change_query, \
    current_pull.records


def run(ws: Workspace, *args: str, check: bool = True):
    return coord(*args, cwd=ws.root, check=check, fake_engine=True)


def pulled_in_two_steps(ws: Workspace) -> None:
    run(ws, "pull", "large")
    append_rows(ws.meta / "datasets" / "cities", ws.meta / "locks", ws.root / "scratch", MORE)
    run(ws, "pull", "large")


def test_a_derivative_pulled_in_two_steps_is_invariant(ws):
    pulled_in_two_steps(ws)
    cities = records(ws, "cities")
    large = cities.filter(pc.greater(cities["population"], 1_000_000))
    report = json.loads(run(ws, "verify", "--invariance", "large", "-o", "json").stdout)
    assert report["verdict"] == "invariant" and report["steps"] == 2
    assert report["records"] == {"committed": large.num_rows, "oneStep": large.num_rows}
    watermark = pc.max(cities["event_time"]).as_py()
    assert report["outputWatermark"]["committed"] == report["outputWatermark"]["oneStep"]
    assert report["outputWatermark"]["committed"].startswith(watermark.strftime("%Y-%m-%dT%H:%M:%S"))


def test_the_text_report_names_the_records_and_steps(ws):
    pulled_in_two_steps(ws)
    out = run(ws, "verify", "--invariance", "large").stdout
    assert "large: invariant: 3 records, the same computed in one step (2 steps committed" in out


def forged(ws: Workspace, scratch) -> None:
    """The derivative ``forged``: its SetTransform says > 5,000,000, its records are > 1,000,000."""
    state = CurrentDataset(ws, "cities").state()
    root = Written(CurrentDataset(ws, "cities").root, state.id, tuple(b.hash for b in state.blocks),
                   tuple(r.slice.physical_hash for r in state.slices), ())
    write_derivative(ws.meta / "datasets" / "forged", ws.meta / "locks", scratch, root,
                     query=QUERY.replace("1000000", "5000000"))


def test_records_its_query_does_not_make_are_not_invariant(ws, tmp_path):
    forged(ws, tmp_path / "d")
    proc = run(ws, "verify", "--invariance", "forged", check=False)
    assert proc.returncode == 1
    cities = records(ws, "cities")
    only_committed = cities.filter(pc.and_(pc.greater(cities["population"], 1_000_000),
                                           pc.less_equal(cities["population"], 5_000_000)))
    assert only_committed["city"].to_pylist() == ["Toronto"]
    assert "not invariant: 1 record differ" in proc.stdout
    [row] = only_committed.select(["event_time", "city", "population"]).to_pylist()
    assert (f"only committed: event_time={row['event_time']:%Y-%m-%dT%H:%M:%S}Z "
            f"city={row['city']} population={row['population']}") in proc.stdout


def test_a_derivative_with_no_step_has_nothing_to_check(ws):
    out = run(ws, "verify", "--invariance", "large").stdout
    assert "large: nothing to check: no step has run yet" in out


def test_a_root_is_refused_in_one_line(ws):
    proc = run(ws, "verify", "--invariance", "cities", check=False)
    assert proc.returncode == 1
    assert "cities is a root dataset" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_query_changed_after_steps_ran_is_refused(ws):
    run(ws, "pull", "large")
    change_query(ws, "large", QUERY.replace("1000000", "2000000"))
    proc = run(ws, "verify", "--invariance", "large", check=False)
    assert proc.returncode == 1
    assert "its query changed at block" in proc.stderr and "after steps had run" in proc.stderr


def test_verify_with_another_engine_replays_and_says_no_compatibility_is_recorded(ws):
    pulled_in_two_steps(ws)
    head = CurrentDataset(ws, "large").head()
    out = run(ws, "verify", "--engine", "sandbox", "large").stdout
    assert "reproducibility: reproduced" in out
    assert "replayed with the fake engine" in out and "no compatibility is recorded" in out
    assert CurrentDataset(ws, "large").head() == head  # nothing written


def test_verify_with_another_engine_reports_a_step_that_does_not_reproduce(ws, tmp_path):
    forged(ws, tmp_path / "d")
    proc = run(ws, "verify", "--engine", "sandbox", "forged", "-o", "json", check=False)
    assert proc.returncode == 1
    [report] = json.loads(proc.stdout)
    assert report["reproducibility"]["verdict"] == "1 block(s) did not reproduce"
    assert report["compatibilityRecorded"] is None
