"""A real ``coord serve`` in a child process, and real HTTP to it (httpx)."""
from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from coordinator.metadata.manifest import load_manifest
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets

from ..support.cli import Held, coord_held
from ..support.manifests import derivative_manifest

ROOT_MANIFEST = """\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {id}
  source:
    kind: root
    fetch: {{kind: filesGlob, path: "{folder}/*.csv", order: byName}}
    read: {{kind: csv, header: true, schema: ["id BIGINT", "name STRING"]}}
    merge: {{kind: append}}
"""

# One TLS context for every request of the process: httpx's module functions make a client per
# call, and each client a context that loads the CA bundle (~45 ms of CPU), even for http://.
TLS = ssl.create_default_context()


@dataclass
class Served:
    proc: Held
    url: str
    home: Path

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url + path, **{"timeout": 30, "verify": TLS, **kw})

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.url + path, timeout=30, verify=TLS, **kw)

    def dataset(self, dataset_id: str) -> dict:
        r = self.get(f"/api/datasets/{dataset_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait_for(self, check: Callable[[], bool], timeout: float = 30, what: str = "") -> float:
        """Seconds until ``check()`` held; fails after ``timeout``."""
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if check():
                return time.monotonic() - began
            assert self.proc.poll() is None, f"coord serve ended: {self.proc.stderr.read()}"
            time.sleep(0.05)
        raise AssertionError(f"not within {timeout} s: {what}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def init_workspace(home: Path, config: str = "serve: {poll: 1h, retryMax: 1s}\n") -> Path:
    Workspace.init(home)
    if config:
        cfg = home / ".coord" / "config.yaml"
        cfg.write_text(cfg.read_text() + config)
    return home


def add_root(home: Path, dataset_id: str, folder: str) -> None:
    (home / folder).mkdir(exist_ok=True)
    path = home / f"{dataset_id}.yaml"
    path.write_text(ROOT_MANIFEST.format(id=dataset_id, folder=folder))
    add_datasets(Workspace.open(home), [load_manifest(path)])


def add_derivative(home: Path, dataset_id: str, inputs: list[str], query: str) -> None:
    path = home / f"{dataset_id}.yaml"
    path.write_text(derivative_manifest(dataset_id, inputs, query))
    add_datasets(Workspace.open(home), [load_manifest(path)])


def drop_csv(folder: Path, name: str, rows: list[tuple[int, str]]) -> None:
    """Write a CSV file under a name the glob does not match, then rename it into place, as
    a producer should (the watcher may see a file written in place half-written)."""
    text = "id,name\n" + "".join(f"{i},{n}\n" for i, n in rows)
    tmp = folder / f".{name}.partial"
    tmp.write_text(text)
    os.rename(tmp, folder / name)


@contextmanager
def serving(home: Path, *args: str, env: dict | None = None) -> Iterator[Served]:
    """``coord serve --port 0 ARGS`` in ``home``; stopped (SIGTERM, then SIGKILL) at the end."""
    proc = coord_held("serve", "--port", "0", *args, cwd=home, env=env)
    try:
        line = proc.stdout.readline()
        if not line.startswith("coord serve: http"):
            proc.wait(timeout=30)
            raise AssertionError(f"coord serve did not start: {line}{proc.stderr.read()}")
        yield Served(proc, line.split()[2].rstrip("/"), home)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def sse_events(served: Served, until: Callable[[list[dict]], bool], timeout: float = 30) -> list[dict]:
    """The events of ``/api/events`` (kind and data), from the first one the service kept
    (``Last-Event-ID: 0``), read until ``until(events)`` holds."""
    events: list[dict] = []
    kind = None
    with httpx.stream("GET", served.url + "/api/events", headers={"Last-Event-ID": "0"},
                      timeout=timeout, verify=TLS) as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                events.append({"kind": kind, **json.loads(line[6:])})
                if until(events):
                    return events
    raise AssertionError("event stream ended")


@pytest.fixture
def home(tmp_path) -> Path:
    return init_workspace(tmp_path)


@pytest.fixture(scope="module")
def snapshots_served(tmp_path_factory) -> Iterator[Served]:
    """``coord serve`` over the snapshot and append roots of the diff tests
    (tests/query/test_diff.py), pulled after each of their four snapshots."""
    from ..query.test_diff import pull_snapshots

    home = init_workspace(tmp_path_factory.mktemp("ws"))
    pull_snapshots(home)
    with serving(home) as s:
        yield s
