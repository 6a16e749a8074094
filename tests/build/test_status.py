"""``coord status``: what is out of date and why, from the chains and fetch state alone;
``coord log --builds``: which input blocks and query produced each derivative block.

Derivative steps are committed without an engine (``run_step_without_engine``): the block the
next pull would commit, with the input slices the real batch planner computes and no output.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from coordinator.build.status import Reason, dataset_status
from coordinator.ingest import pull_root
from coordinator.metadata import objects as o
from coordinator.metadata.ids import DatasetRef
from coordinator.metadata.timestamps import now_utc
from coordinator.repository import add_repository, pull_from_repository, push_dataset
from coordinator.transform.plan import plan_transform
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets
from tests.ingest.conftest import add_dataset, write
from tests.repository.conftest import append_slices, make_root
from tests.support.cli import ROOT, coord

ROOT_DS, DERIVED = "org.example.root", "org.example.derived"


def derivative(ws: Workspace, query: str = "SELECT * FROM input", inputs=(ROOT_DS,)) -> None:
    transform = o.TransformSql(engine="spark", query=query)
    source = o.DatasetSourceDerivative(inputs=list(inputs), transform=transform)
    add_datasets(ws, [o.DatasetSnapshot(id=DERIVED, source=source)], replace=True)


def run_step_without_engine(ws: Workspace, dataset_id: str = DERIVED) -> bytes:
    """Commit what a pull would: the input slices the planner says are new (no output records)."""
    ds = ws.dataset(dataset_id)
    plan = plan_transform(ws, ds)
    checkpoint = ws.run_dir / f"checkpoint-{plan.transaction_id()}"
    checkpoint.mkdir()
    (checkpoint / "offsets").write_text("0")
    with ds.writer() as w:
        block = o.MetadataBlock(system_time=now_utc(), input_slices=[i.consumed_slice() for i in plan.inputs])
        return w.commit(block, checkpoint_dir=checkpoint)


def reasons(ws: Workspace, dataset_id: str = DERIVED) -> list[Reason]:
    return dataset_status(ws, ws.dataset(dataset_id)).reasons


# --- derivatives -------------------------------------------------------------------------------


def test_a_derivative_never_run_is_behind_by_every_input_block(ws):
    make_root(ws, ROOT_DS, slices=2)
    derivative(ws)
    st = dataset_status(ws, ws.dataset(DERIVED))
    assert st.reasons == [Reason.NEW_INPUT] and st.new_input == {ROOT_DS: 3}


def test_a_derivative_that_consumed_everything_is_up_to_date(ws):
    make_root(ws, ROOT_DS, slices=2)
    derivative(ws)
    run_step_without_engine(ws)
    assert dataset_status(ws, ws.dataset(DERIVED)).up_to_date


def test_new_input_blocks_are_counted_per_input(ws):
    make_root(ws, ROOT_DS, slices=1)
    make_root(ws, "org.example.other", slices=1)
    derivative(ws, inputs=(ROOT_DS, "org.example.other"))
    run_step_without_engine(ws)
    append_slices(ws.dataset(ROOT_DS), 2)
    st = dataset_status(ws, ws.dataset(DERIVED))
    assert st.reasons == [Reason.NEW_INPUT] and st.new_input == {ROOT_DS: 2}


def test_a_changed_query_is_reported_until_the_next_run(ws):
    make_root(ws, ROOT_DS, slices=1)
    derivative(ws)
    run_step_without_engine(ws)
    derivative(ws, query="SELECT value FROM input")
    assert reasons(ws) == [Reason.QUERY_CHANGED]
    run_step_without_engine(ws)
    assert reasons(ws) == []


def test_a_derivative_waits_while_an_input_has_no_data(ws):
    make_root(ws, ROOT_DS, slices=0)
    derivative(ws)
    st = dataset_status(ws, ws.dataset(DERIVED))
    assert st.reasons == [Reason.WAITING] and st.waiting_for == [ROOT_DS]


def test_a_dataset_pulled_from_a_repository_is_not_checked_against_it(ws, tmp_path):
    url = (tmp_path / "repo").as_uri()
    add_repository(ws, "shared", url)
    make_root(ws, ROOT_DS, slices=1)
    push_dataset(ws, ROOT_DS, "shared")
    other = Workspace.init(tmp_path / "other")
    add_repository(other, "shared", url)
    pull_from_repository(other, DatasetRef.parse(f"shared/{ROOT_DS}"))
    st = dataset_status(other, other.dataset(ROOT_DS))
    assert st.reasons == [Reason.NOT_CHECKED] and st.unchecked == f"pulled from shared/{ROOT_DS}"


# --- roots -------------------------------------------------------------------------------------


LOCAL_FILE = """
    source:
      kind: root
      fetch: {kind: url, url: "in/data.csv"}
      read: {kind: csv, header: true, schema: ["id INT", "name STRING"]}
      merge: {kind: append}
"""


def test_a_local_source_file_is_checked_by_stat_then_content(ws):
    path = write(ws.root / "in" / "data.csv", "id,name\n1,a\n")
    add_dataset(ws, LOCAL_FILE, ROOT_DS)
    assert reasons(ws, ROOT_DS) == [Reason.NEVER_PULLED]
    pull_root(ws, ROOT_DS)
    assert reasons(ws, ROOT_DS) == []

    os.utime(path, ns=(0, 10**18))  # touched, same bytes: the recorded hash says unchanged
    assert reasons(ws, ROOT_DS) == []
    path.write_text("id,name\n1,b\n")  # same size, other bytes
    st = dataset_status(ws, ws.dataset(ROOT_DS))
    assert st.reasons == [Reason.SOURCE_CHANGED] and st.new_files == ["data.csv"]


def test_a_glob_source_names_the_new_files(ws):
    write(ws.root / "in" / "a.csv", "id,name\n1,a\n")
    add_dataset(ws, LOCAL_FILE.replace('url, url: "in/data.csv"', 'filesGlob, path: "in/*.csv"'), ROOT_DS)
    pull_root(ws, ROOT_DS)
    write(ws.root / "in" / "b.csv", "id,name\n2,b\n")
    write(ws.root / "in" / "c.csv", "id,name\n3,c\n")
    assert dataset_status(ws, ws.dataset(ROOT_DS)).new_files == ["b.csv", "c.csv"]


def test_a_remote_source_is_not_checked(ws):
    add_dataset(ws, LOCAL_FILE.replace("in/data.csv", "https://example.org/data.csv"), ROOT_DS)
    st = dataset_status(ws, ws.dataset(ROOT_DS))
    assert st.reasons == [Reason.NOT_CHECKED]
    assert st.unchecked == "remote source https://example.org/data.csv"


# --- the commands ------------------------------------------------------------------------------


@pytest.fixture
def pipeline(ws) -> Workspace:
    """A root read from a local file, a derivative that ran once, then one more root block."""
    write(ws.root / "in" / "data.csv", "id,name\n1,a\n")
    add_dataset(ws, LOCAL_FILE, ROOT_DS)
    pull_root(ws, ROOT_DS)
    derivative(ws)
    run_step_without_engine(ws)
    write(ws.root / "in" / "data.csv", "id,name\n1,a\n2,b\n")
    pull_root(ws, ROOT_DS)
    return ws


def test_status_and_list_say_what_is_behind_and_why(pipeline):
    status = coord("status", cwd=pipeline.root).stdout
    assert f"{DERIVED} derivative 1 new input block behind ({ROOT_DS}: 1)" in " ".join(status.split())
    assert f"{ROOT_DS} root up to date" in " ".join(status.split())
    listed = coord("list", cwd=pipeline.root).stdout.splitlines()
    assert next(line for line in listed if line.split()[:1] == [DERIVED]).split()[-1] == "behind"


def test_status_and_list_as_json_for_scripts(pipeline):
    status = {s["id"]: s for s in json.loads(coord("status", "-o", "json", cwd=pipeline.root).stdout)}
    assert status[DERIVED]["reasons"] == ["newInput"] and not status[DERIVED]["upToDate"]
    assert status[DERIVED]["newInputBlocks"] == {ROOT_DS: 1}
    assert status[ROOT_DS]["upToDate"] and status[ROOT_DS]["reasons"] == []
    listed = {d["id"]: d for d in json.loads(coord("list", "-o", "json", cwd=pipeline.root).stdout)}
    root = pipeline.dataset(ROOT_DS).state()
    assert listed[ROOT_DS] == {"id": ROOT_DS, "odf": "0.18", "kind": "root", "head": root.head.hex(),
                               "blocks": root.num_blocks, "records": 3,  # 1, then the file read again whole
                               "watermark": listed[ROOT_DS]["watermark"], "upToDate": True, "reasons": []}
    assert listed[DERIVED]["reasons"] == ["newInput"]


def test_status_reads_no_data_and_imports_no_arrow(pipeline):
    probe = ("import sys\nfrom coordinator.cli.main import main\n"
             "try:\n    main(['status'])\nexcept SystemExit:\n    pass\n"
             "print('ARROW' if {'pyarrow', 'pandas'} & set(sys.modules) else 'NO ARROW')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", probe], cwd=pipeline.root, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip().endswith("NO ARROW") and "behind" in proc.stdout


def test_log_builds_names_the_input_blocks_and_query_of_each_block(pipeline):
    run_step_without_engine(pipeline)
    root_blocks = [h for h, _ in pipeline.dataset(ROOT_DS).blocks()][::-1]  # oldest first
    derived = [h for h, _ in pipeline.dataset(DERIVED).blocks()]  # newest first
    builds = json.loads(coord("log", DERIVED, "--builds", "-o", "json", cwd=pipeline.root).stdout)
    assert [b["block"] for b in builds] == [h.hex() for h in derived[:2]]
    assert [b["inputs"][0]["blocks"] for b in builds] == [[root_blocks[-1].hex()],
                                                         [h.hex() for h in root_blocks[:-1]]]
    assert {b["queryBlock"] for b in builds} == {derived[-1].hex()}  # the block that set the query
    assert builds[0]["transform"]["query"] == "SELECT * FROM input"

    text = coord("log", DERIVED, "--builds", cwd=pipeline.root).stdout
    assert f"query of block {derived[-1].hex()[:12]}" in text and root_blocks[-1].hex()[:12] in text
