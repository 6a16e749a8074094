"""A pull of several datasets keeps going past one that fails: what depends on it is skipped,
everything else is pulled, the failures are listed at the end and the exit code is 1."""
from __future__ import annotations

from contextlib import ExitStack

import pytest
import yaml

from coordinator.engine.container import ContainerEngineError
from coordinator.engine.session import EngineOnDemand
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..transform.pipeline import (
    HOURLY,
    LARGE,
    ORDERS,
    derivative_source,
    manifest,
    order_rows,
    write_manifests,
    write_orders_file,
)

BROKEN = "com.example.broken"
BROKEN_LARGE = "com.example.broken.large"


def broken_root(home) -> dict:
    source = {"kind": "root", "fetch": {"kind": "url", "url": (home / "gone.csv").as_uri()},
              "read": {"kind": "csv", "header": True, "schema": ["event_time TIMESTAMP", "amount DOUBLE"]},
              "merge": {"kind": "append"}}
    return manifest(BROKEN, source)


def workspace_with_a_broken_root(home):
    coord("init", "--odf", "0.18", cwd=home)
    folder = write_manifests(home)
    docs = [broken_root(home), manifest(BROKEN_LARGE, derivative_source(
        f"SELECT event_time, amount FROM `{BROKEN}` WHERE amount > 10", inputs=(BROKEN,)))]
    for doc in docs:
        (folder / f"{doc['content']['id']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (folder / "com.example.orders.hourly.yaml").unlink()
    coord("add", str(folder), cwd=home)
    write_orders_file(home, "1.csv", order_rows(2))
    return home


def test_pull_all_pulls_what_does_not_depend_on_a_failed_dataset(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    proc = coord("pull", "--all", cwd=home, check=False, fake_engine=True)
    assert proc.returncode == 1
    assert f"{ORDERS}: 8 new records" in proc.stdout
    assert f"{LARGE}: " in proc.stdout and "new records" in proc.stdout.split(f"{LARGE}: ")[1].splitlines()[0]
    assert f"{BROKEN}: failed: " in proc.stdout
    assert f"{BROKEN_LARGE}: skipped: it depends on {BROKEN}, which failed" in proc.stdout
    ws = Workspace.open(home)
    assert ws.dataset(LARGE).data_files() and not ws.dataset(BROKEN_LARGE).data_files()


def test_a_failure_is_named_at_the_end_on_stderr_in_one_line(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    proc = coord("pull", "--all", cwd=home, check=False, fake_engine=True)
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"coord: error: {BROKEN}: fetch ") and "gone.csv" in line
    assert line.endswith("(1 skipped: they depend on it)")


def test_several_failures_are_listed_at_the_end(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    (home / "orders" / "1.csv").write_text("event_time,order_id,customer,amount\nnot a time,1,ann,2.0\n")
    proc = coord("pull", "--all", cwd=home, check=False, fake_engine=True)
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == "coord: error: 2 of 4 datasets failed (2 skipped: they depend on them):"
    assert sorted(line.split(":")[0] for line in lines[1:]) == [f"  {BROKEN}", f"  {ORDERS}"]


def test_a_pull_of_one_dataset_fails_in_one_line_naming_it(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    proc = coord("pull", BROKEN, cwd=home, check=False)
    gone = (home / "gone.csv").as_uri()
    assert proc.returncode == 1
    assert proc.stdout == f"{BROKEN}: failed: fetch {gone}: No such file or directory\n"
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"coord: error: {BROKEN}: fetch ") and "gone.csv" in line


def test_debug_shows_the_traceback_of_each_failure(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    proc = coord("--debug", "pull", BROKEN, cwd=home, check=False)
    assert proc.returncode == 1 and "Traceback (most recent call last)" in proc.stderr


def test_pull_recursive_skips_the_dataset_asked_for_when_its_input_fails(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    proc = coord("pull", "-r", BROKEN_LARGE, cwd=home, check=False)
    assert proc.returncode == 1
    assert f"{BROKEN_LARGE}: skipped: it depends on {BROKEN}, which failed" in proc.stdout


@pytest.mark.engine_start  # the configured runtime is tried for real (it cannot start: no Spark)
def test_an_engine_that_cannot_start_fails_every_derivative_with_its_error(tmp_path):
    home = workspace_with_a_broken_root(tmp_path)
    coord("add", str(write_manifests(home) / f"{HOURLY}.yaml"), cwd=home)  # a second derivative
    no_api = {"COORD_ENGINE_RUNTIME": "container", "COORD_CONTAINER_HOST": f"unix://{tmp_path}/no.sock"}
    proc = coord("pull", "--all", cwd=home, env=no_api, check=False)
    failures = [line for line in proc.stdout.splitlines() if line.startswith(f"{ORDERS}.")]
    assert len(failures) == 2 and all(": failed: " in f for f in failures), proc.stdout + proc.stderr
    first, second = (f.split(": failed: ", 1)[1] for f in failures)
    assert first == second and "no.sock" in first
    assert proc.stderr.splitlines()[0] == \
        "coord: error: 3 of 5 datasets failed (1 skipped: they depend on them):"


@pytest.mark.engine_start
def test_an_engine_that_could_not_start_is_not_tried_again_by_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("COORD_ENGINE_RUNTIME", "container")
    monkeypatch.setenv("COORD_CONTAINER_HOST", f"unix://{tmp_path}/no.sock")
    starts: list[int] = []
    with ExitStack() as stack:
        engine = EngineOnDemand(Workspace.init(tmp_path / "ws"), stack, lambda: starts.append(1) or [])
        for _ in range(2):
            with pytest.raises(ContainerEngineError, match="no container API"):
                engine.get()
    assert starts == [1]
