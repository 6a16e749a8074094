"""Helpers for ingest tests: datasets from manifest text, slices back, a local HTTP server."""
from __future__ import annotations

import email.utils
import textwrap
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.manifest import load_manifest
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets

DATASET = "test.ds"


def add_dataset(ws: Workspace, content: str, dataset_id: str = DATASET) -> str:
    """Add a dataset from the YAML of a manifest's ``content`` (without ``id``)."""
    body = textwrap.indent(textwrap.dedent(content).strip(), "  ")
    path = ws.root / f"{dataset_id}.yaml"
    path.write_text(f"apiVersion: 1\nkind: DatasetSnapshot\ncontent:\n  id: {dataset_id}\n{body}\n")
    add_datasets(ws, [load_manifest(path)])
    return dataset_id


def slices_of(ws: Workspace, dataset_id: str = DATASET) -> list[pa.Table]:
    return [pq.read_table(f) for f in ws.dataset(dataset_id).data_files()]


def rows_of(ws: Workspace, dataset_id: str = DATASET, drop=("system_time",)) -> list[dict]:
    return [r for t in slices_of(ws, dataset_id) for r in t.drop_columns(list(drop)).to_pylist()]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@dataclass
class Resource:
    body: bytes
    etag: str | None = None
    last_modified: str | None = None  # an HTTP date


@dataclass
class FakeSite:
    """What the test server serves, and the requests it saw."""

    url: str = ""
    resources: dict[str, Resource] = field(default_factory=dict)
    requests: list[dict] = field(default_factory=list)

    def put(self, path: str, body: bytes, *, etag: str | None = None,
            modified: float | None = None) -> str:
        last_modified = email.utils.formatdate(modified, usegmt=True) if modified else None
        self.resources[path] = Resource(body, etag, last_modified)
        return self.url + path


@pytest.fixture
def site():
    """A real HTTP server on 127.0.0.1 (ETag and Last-Modified validators, 304s)."""
    state = FakeSite()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            state.requests.append({"path": self.path, **dict(self.headers)})
            res = state.resources.get(self.path)
            if res is None:
                self.send_error(404)
                return
            unchanged = (res.etag and self.headers.get("If-None-Match") == res.etag) or (
                res.last_modified and self.headers.get("If-Modified-Since") == res.last_modified)
            self.send_response(304 if unchanged else 200)
            if res.etag:
                self.send_header("ETag", res.etag)
            if res.last_modified:
                self.send_header("Last-Modified", res.last_modified)
            self.send_header("Content-Length", "0" if unchanged else str(len(res.body)))
            self.end_headers()
            if not unchanged:
                self.wfile.write(res.body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
