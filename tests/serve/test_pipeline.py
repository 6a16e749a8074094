"""``coord serve`` with the real sandboxed Spark engine: a file dropped into a root's folder
reaches the last dataset of a chain (seen live in a real browser), and a service killed with
SIGKILL in the middle of a propagation ends, once restarted, where an uninterrupted one does.

The chain: ``t.people`` (CSV files) → ``t.long`` (names of three letters or more) →
``t.long-ids`` (their ids). Expected records are computed here from the CSV rows.
"""
from __future__ import annotations

import json
import os
import signal
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.workspace import Workspace

from ..support import engines as test_engines
from ..support.cli import coord
from .conftest import Served, add_derivative, add_root, drop_csv, init_workspace, serving, sse_events

pytestmark = pytest.mark.engine_start
SANDBOX = {"COORD_ENGINE_RUNTIME": "sandbox"}
PEOPLE, LONG, IDS = "t.people", "t.long", "t.long-ids"
FIRST = [(1, "ann"), (2, "bo"), (3, "cid")]
SECOND = [(4, "di"), (5, "eve"), (6, "fay"), (7, "gus")]


def chain(home) -> None:
    add_root(home, PEOPLE, "people")
    add_derivative(home, LONG, [PEOPLE],
                   "SELECT event_time, id, name FROM `t.people` WHERE length(name) >= 3")
    add_derivative(home, IDS, [LONG], "SELECT event_time, id FROM `t.long`")


def long_ids(*files: list[tuple[int, str]]) -> list[int]:
    return [i for rows in files for i, name in rows if len(name) >= 3]


def settled(served: Served, expected_ids: int) -> bool:
    ids = served.dataset(IDS)
    return ids["records"] == expected_ids and not any(d["outOfDate"] or d["state"] != "idle"
                                                      for d in served.get("/api/datasets").json())


class EngineFolders:
    """The engine run folders (``.coord/run/engine-*``, one per engine started) seen while
    the block runs, polled every 20 ms: an engine lives for seconds, so none is missed."""

    def __init__(self, home):
        self.run, self.seen, self._stop = home / ".coord" / "run", set(), threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.02):
            self.seen |= {p.name for p in self.run.glob("engine-*")}

    def running(self) -> bool:
        return any(self.run.glob("engine-*"))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_a_dropped_file_shows_downstream_in_the_browser_without_reloading(tmp_path, browser):
    home = init_workspace(tmp_path, "serve: {poll: 1h, engineIdle: 5s}\n")
    chain(home)
    drop_csv(home / "people", "a.csv", FIRST)
    with EngineFolders(home) as engines, serving(home, env=SANDBOX) as served:
        page = browser.new_page()
        page.goto(served.url + "/")
        ids_cell = page.locator(f'tr[data-id="{IDS}"] td.records')
        before = len(long_ids(FIRST))
        page.wait_for_function(
            f"() => document.querySelector('tr[data-id=\"{IDS}\"] td.records')?.textContent === '{before}'",
            timeout=300_000)
        assert page.locator("#graph rect").count() == 3  # the lineage drawn: three datasets
        page.evaluate("window.notReloaded = true")
        drop_csv(home / "people", "b.csv", SECOND)
        after = len(long_ids(FIRST, SECOND))
        page.wait_for_function(
            f"() => document.querySelector('tr[data-id=\"{IDS}\"] td.records')?.textContent === '{after}'",
            timeout=120_000)
        assert ids_cell.text_content() == str(after)
        assert page.evaluate("window.notReloaded") is True
        page.close()
        ids = served.get(f"/api/datasets/{IDS}/tail", params={"n": 100}).json()["records"]
        assert sorted(r["id"] for r in ids) == long_ids(FIRST, SECOND)
        served.wait_for(lambda: not engines.running(), timeout=60, what="the idle engine stopped")
        assert len(engines.seen) == 1  # one warm engine did four transforms in two propagations


def content(home, dataset_id: str) -> tuple[list[int], list[dict]]:
    """Per data block its record count, and the records without the times (system time and
    event time, here the ingest time: the only values two runs cannot share)."""
    ds = Workspace.open(home).dataset(dataset_id)
    tables = [pq.read_table(f) for f in ds.data_files()]
    rows = pa.concat_tables(tables).drop_columns(["system_time", "event_time"]).to_pylist()
    return [t.num_rows for t in tables], sorted(rows, key=lambda r: r["id"])


def test_a_service_killed_mid_propagation_ends_where_an_uninterrupted_one_does(tmp_path, shared_engine):
    homes = {}
    for run in ("uninterrupted", "killed"):
        home = homes[run] = init_workspace(tmp_path / run)
        chain(home)
        drop_csv(home / "people", "a.csv", FIRST)
        drop_csv(home / "people", "b.csv", SECOND)
    expected = len(long_ids(FIRST, SECOND))

    # the reference on the worker's shared engine; the killed service and its restart start their own
    with serving(homes["uninterrupted"], env={test_engines.ENV: f"attach:{shared_engine}"}) as served:
        served.wait_for(lambda: settled(served, expected), timeout=300)

    with serving(homes["killed"], env=SANDBOX) as served:
        # the first derivative has committed and the second is running on the warm engine
        sse_events(served, lambda es: any(e["kind"] == "state" and e["dataset"] == IDS
                                          and e["state"] == "running" for e in es), timeout=300)
        os.kill(served.proc.pid, signal.SIGKILL)
        served.proc.wait()
    assert Workspace.open(homes["killed"]).dataset(IDS).state().num_records == 0  # nothing yet
    with serving(homes["killed"], env=SANDBOX) as served:
        served.wait_for(lambda: settled(served, expected), timeout=300)

    for dataset_id in (PEOPLE, LONG, IDS):
        assert content(homes["killed"], dataset_id) == content(homes["uninterrupted"], dataset_id), dataset_id
        blocks = [Workspace.open(h).dataset(dataset_id).state().num_blocks for h in homes.values()]
        assert blocks[0] == blocks[1], dataset_id
    assert content(homes["killed"], IDS)[1] == [{"id": i} for i in long_ids(FIRST, SECOND)]


def test_record_provenance_is_answered_with_the_warm_engine_as_the_cli_answers_it(tmp_path, shared_engine):
    home = init_workspace(tmp_path, "serve: {poll: 1h, engineIdle: 60s}\n")
    chain(home)
    drop_csv(home / "people", "a.csv", FIRST)
    with serving(home, env=SANDBOX) as served:
        served.wait_for(lambda: settled(served, len(long_ids(FIRST))), timeout=300, what="propagated")
        block = Workspace.open(home).dataset(LONG).head().hex()
        r = served.get(f"/api/datasets/{LONG}/provenance", params={"block": block, "where": "name = 'cid'"},
                       timeout=300)
        assert r.status_code == 200, r.text
        # the CLI's answer on the worker's shared engine: a second start here proves nothing more
        cli = coord("provenance", LONG, "--block", block, "--where", "name = 'cid'", "-o", "json",
                    cwd=home, env={test_engines.ENV: f"attach:{shared_engine}"}).stdout
        names = pq.read_table(Workspace.open(home).dataset(LONG).data_file(bytes.fromhex(block)))["name"]
        by_row = served.get(f"/api/datasets/{LONG}/provenance",
                            params={"block": block, "row": names.to_pylist().index("cid")}, timeout=300)
    assert r.json() == json.loads(cli)
    assert by_row.status_code == 200 and by_row.json() == r.json(), by_row.text  # the same record, by its row
    [record] = r.json()["records"]
    [derivation] = record["derivations"]
    [person] = derivation["inputs"]
    assert (person["dataset"], person["values"]["id"], person["values"]["name"]) == (PEOPLE, "3", "cid")
