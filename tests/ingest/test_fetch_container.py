"""The ``Container`` fetch of a current-ODF (0.39) root against real Podman: the image runs as
the reference runs it (kamu-cli ``fetch_service/container.rs``: its standard output is the
data, ``ODF_ETAG`` the state the last run left, files under ``/opt/odf/out`` the new state and
whether it has more), without network unless the workspace allows it. The images here are the
project's local base image running a Python script given as the step's ``args``; every
expected record is computed by hand from the script's rule.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord

pytestmark = pytest.mark.container

NAME = "ticks"
IMAGE = "localhost/odf-base:bookworm"
# prints three records after the etag it is given (0 without), leaves the next one as its etag;
# with MORE set, says it has more data until it has printed MORE records in all
COUNTER = """\
import json, os
start = int(os.environ["ODF_ETAG"] or 0)
net = ",".join(sorted(os.listdir("/sys/class/net")))
for n in range(start, start + 3):
    print(json.dumps({"at": f"2024-01-01T00:00:{n:02}Z", "n": n, "net": net}))
open(os.environ["ODF_NEW_ETAG_PATH"], "w").write(str(start + 3))
if start + 3 < int(os.environ.get("MORE") or 0):
    open(os.environ["ODF_NEW_HAS_MORE_DATA_PATH"], "w").write("")
"""
FAILING = 'import sys; print("{}"); sys.exit("no quota left at the source")'
# one record, unless it was run before (the etag v1 given back), when it prints nothing but
# with LOUD set
STEADY = """\
import json, os
if not os.environ["ODF_ETAG"] or os.environ.get("LOUD"):
    print(json.dumps({"at": "2024-01-01T00:00:00Z", "n": 0, "net": ""}))
open(os.environ["ODF_NEW_ETAG_PATH"], "w").write("v1")
"""
# 60,000 records, about 10 MB: more than a container log gives when it is followed
MANY = """\
import json
for n in range(60000):
    print(json.dumps({"at": "2024-01-01T00:00:00Z", "n": n, "net": "x" * 120}))
"""


def manifest(home: Path, script: str, image: str = IMAGE, env: str = "") -> Path:
    path = home / f"{NAME}.yaml"
    path.write_text(textwrap.dedent("""\
        kind: DatasetSnapshot
        version: 1
        content:
          name: ticks
          kind: Root
          metadata:
            - kind: SetPollingSource
              fetch:
                kind: Container
                image: %s
                command: [python3, -c]
                args: [%s]
        %s
              read:
                kind: NdJson
                ddlSchema: ["at TIMESTAMP", "n BIGINT", "net STRING"]
              merge: {kind: Append}
            - kind: SetVocab
              eventTimeColumn: at
        """) % (image, json.dumps(script), textwrap.indent(env, " " * 8)))
    return path


@pytest.fixture
def home(engine_image, tmp_path) -> Path:
    coord("init", cwd=tmp_path)
    return tmp_path


def records(home: Path) -> list[int]:
    rows = json.loads(coord("tail", NAME, "-n", "100", "-o", "json", cwd=home).stdout)
    return sorted(r["n"] for r in rows)


def add_data(home: Path) -> list[e.AddData]:
    ds = CurrentDataset(Workspace.open(home), NAME)
    return [b.block.event for b in ds.state().blocks if isinstance(b.block.event, e.AddData)]


def test_what_the_image_prints_is_ingested_and_the_next_pull_goes_on_from_its_etag(home):
    coord("add", str(manifest(home, COUNTER)), cwd=home)
    coord("pull", NAME, cwd=home)
    assert records(home) == [0, 1, 2]
    coord("pull", NAME, cwd=home)
    assert records(home) == [0, 1, 2, 3, 4, 5]  # ODF_ETAG 3: the records after the first three
    assert [(a.new_source_state.kind, a.new_source_state.value) for a in add_data(home)] == [
        ("odf/etag", "3"), ("odf/etag", "6")]


def test_the_image_runs_without_network(home):
    coord("add", str(manifest(home, COUNTER)), cwd=home)
    coord("pull", NAME, cwd=home)
    rows = json.loads(coord("tail", NAME, "-o", "json", cwd=home).stdout)
    assert {r["net"] for r in rows} == {"lo"}


def test_the_image_reaches_the_hosts_network_when_the_workspace_allows_it(home):
    coord("config", "set", "engine.allowNetwork", "true", cwd=home)
    coord("add", str(manifest(home, COUNTER)), cwd=home)
    coord("pull", NAME, cwd=home)
    rows = json.loads(coord("tail", NAME, "-o", "json", cwd=home).stdout)
    host = ",".join(sorted(p.name for p in Path("/sys/class/net").iterdir()))
    assert {r["net"] for r in rows} == {host} != {"lo"}


def test_all_the_image_prints_is_taken_however_much(home):
    coord("add", str(manifest(home, MANY)), cwd=home)
    coord("pull", NAME, cwd=home)
    [row] = json.loads(coord("sql", "-o", "json", "-c",
                             f'SELECT count(*) AS c, sum(n) AS s FROM "{NAME}"', cwd=home).stdout)
    count, total = row["c"], row["s"]
    assert (count, total) == (60000, 60000 * 59999 // 2)


def test_an_image_with_more_data_runs_again_from_the_state_it_left(home):
    coord("add", str(manifest(home, COUNTER, env="env: [{name: MORE, value: '9'}]")), cwd=home)
    coord("pull", NAME, cwd=home)
    assert records(home) == list(range(9))  # three runs: from etag 0, 3 and 6
    assert add_data(home)[-1].new_source_state.value == "9"


def test_a_value_is_templated_from_the_environment_as_the_reference_does(home):
    coord("add", str(manifest(home, COUNTER, env="env: [{name: MORE, value: "
                                                 "\"${{ env.COORD_TEST_MORE || '0' }}\"}]")), cwd=home)
    coord("pull", NAME, cwd=home, env={"COORD_TEST_MORE": "6"})
    assert records(home) == list(range(6))


def test_the_same_state_and_no_output_is_nothing_new(home):
    coord("add", str(manifest(home, STEADY)), cwd=home)
    coord("pull", NAME, cwd=home)
    coord("pull", NAME, cwd=home)
    assert records(home) == [0]
    assert len(add_data(home)) == 1


def test_the_same_state_with_output_is_refused_as_the_reference_refuses_it(home):
    coord("add", str(manifest(home, STEADY, env="env: [{name: LOUD, value: '1'}]")), cwd=home)
    coord("pull", NAME, cwd=home)
    refused = coord("pull", NAME, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1].endswith(
        f"fetch Container {IMAGE}: the image left the same source state as before but printed "
        "data; it must leave a new state (/opt/odf/out/new-etag or new-last-modified) with new "
        "data")
    assert len(add_data(home)) == 1


def test_an_image_that_fails_is_refused_in_one_line_and_nothing_is_written(home):
    coord("add", str(manifest(home, FAILING)), cwd=home)
    refused = coord("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].endswith(
        f"fetch Container {IMAGE}: the image exited with status 1: no quota left at the source")
    assert add_data(home) == []


def test_an_image_not_in_the_local_store_is_refused_naming_it(home):
    coord("add", str(manifest(home, COUNTER, image="localhost/no-such-fetcher:0.1")), cwd=home)
    refused = coord("pull", NAME, cwd=home, check=False)
    assert refused.stderr.strip().splitlines()[-1].endswith(
        "fetch Container: image localhost/no-such-fetcher:0.1 is not in the local image store; "
        "load it (podman pull or podman load) and pull again")


def test_an_odf_0_18_workspace_refuses_the_container_fetch_at_add(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    refused = coord("add", str(manifest(tmp_path, COUNTER)), cwd=tmp_path, check=False)
    assert refused.stderr.strip().splitlines()[-1].endswith(
        "content.metadata[0].fetch: fetch kind Container is not supported by ODF 0.18 "
        "workspaces yet (a 0.39 dataset runs it: make the workspace with coord init --odf 0.39)")
