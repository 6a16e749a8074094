"""Fixtures for sharing tests: a real moto S3 server, repositories of both kinds, datasets.

Datasets are built with the workspace API directly (small Parquet slices hashed with
``coordinator.data.hashing``), so these tests depend on neither ingest nor the engine.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.data.hashing import logical_hash
from coordinator.metadata import objects as o
from coordinator.metadata.timestamps import TimeInterval, now_utc
from coordinator.repository import add_repository
from coordinator.workspace import Dataset, Workspace
from coordinator.workspace.fsutil import physical_hash

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # moto (like some S3-compatible stores) mishandles trailing checksums.
    "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
}
BUCKET = "odf-repo"

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint():
    """A moto S3 server in its own process on a free loopback port: ``host:port``."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.1)
    yield endpoint
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def s3_env(monkeypatch):
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def s3_url(moto_endpoint, s3_env) -> str:
    """An empty bucket prefix on the moto server (the server is reset for every test)."""
    req = urllib.request.Request(f"http://{moto_endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(req, timeout=10)
    s3 = boto3.client("s3", endpoint_url=f"http://{moto_endpoint}")
    s3.create_bucket(Bucket=BUCKET)
    return f"s3+http://{moto_endpoint}/{BUCKET}/datasets"


@pytest.fixture(params=["file", "s3"])
def repo_url(request, tmp_path) -> str:
    if request.param == "file":
        return (tmp_path / "repo").as_uri()
    return request.getfixturevalue("s3_url")


@pytest.fixture
def other_ws(tmp_path) -> Workspace:
    return Workspace.init(tmp_path / "other")


def with_repo(ws: Workspace, url: str, name: str = "shared") -> Workspace:
    add_repository(ws, name, url)
    return ws


# --- building datasets -------------------------------------------------------------------------

ROOT_SOURCE = o.DatasetSourceRoot(
    fetch=o.FetchStepUrl(url="file:///dev/null"),
    read=o.ReadStepCsv(header=True),
    merge=o.MergeStrategyAppend(),
)


def write_slice(path: Path, t, start: int, rows: int, *, physical: bool = True) -> o.DataSlice:
    """A Parquet slice of ``rows`` events and the DataSlice that describes it."""
    base = datetime(2024, 1, 1, tzinfo=UTC)
    table = pa.table({
        "system_time": pa.array([t] * rows, pa.timestamp("us", tz="UTC")),
        "event_time": pa.array([base + timedelta(seconds=start + i) for i in range(rows)],
                               pa.timestamp("us", tz="UTC")),
        "value": pa.array([f"v{start + i}" for i in range(rows)]),
    })
    pq.write_table(table, path)
    return o.DataSlice(
        hash=logical_hash(table), interval=TimeInterval.singleton(t), num_records=rows,
        physical_hash=physical_hash(path) if physical else None,
    )


def make_root(ws: Workspace, dataset_id: str, slices: int = 2, rows: int = 5, *,
              physical: bool = True) -> Dataset:
    ds = ws.dataset(dataset_id)
    with ds.writer() as w:
        w.commit(o.MetadataBlock(system_time=now_utc(), source=ROOT_SOURCE))
    append_slices(ds, slices, rows, physical=physical)
    return ds


def append_slices(ds: Dataset, slices: int, rows: int = 5, *, physical: bool = True) -> list[bytes]:
    hashes = []
    with ds.writer() as w:
        offset = sum(b.output_slice.num_records for _, b in ds.blocks() if b.output_slice)
        for i in range(slices):
            t = now_utc()
            start = offset + i * rows
            path = ds.ws.run_dir / f"slice-{start}.parquet"
            s = write_slice(path, t, start, rows, physical=physical)
            hashes.append(w.commit(o.MetadataBlock(system_time=t, output_slice=s,
                                                   output_watermark=t), data_file=path))
    return hashes


def make_derivative(ws: Workspace, dataset_id: str, upstream: Dataset, steps: int = 2, *,
                    physical: bool = True) -> Dataset:
    """A derivative whose transform blocks each have input slices, output and a checkpoint."""
    ds = ws.dataset(dataset_id)
    source = o.DatasetSourceDerivative(
        inputs=[upstream.id], transform=o.TransformSql(engine="spark", query="SELECT * FROM input"))
    inputs = [b.output_slice for _, b in reversed(list(upstream.blocks())) if b.output_slice]
    with ds.writer() as w:
        w.commit(o.MetadataBlock(system_time=now_utc(), source=source))
        for i in range(steps):
            t = now_utc()
            path = ws.run_dir / f"out-{i}.parquet"
            out = write_slice(path, t, i * 3, 3, physical=physical)
            checkpoint = ws.run_dir / f"ckpt-{i}"
            (checkpoint / "state").mkdir(parents=True)
            (checkpoint / "offsets").write_text(str(i))
            (checkpoint / "state" / "0.delta").write_bytes(bytes([i]) * 100)
            block = o.MetadataBlock(system_time=t, output_slice=out, output_watermark=t,
                                    input_slices=inputs[i:i + 1])
            w.commit(block, data_file=path, checkpoint_dir=checkpoint)
    return ds


def snapshot(ds: Dataset) -> dict[str, bytes]:
    """Every file of a dataset folder (to show a failed pull changed nothing)."""
    if not ds.root.exists():
        return {}
    return {str(p.relative_to(ds.root)): p.read_bytes() for p in ds.root.rglob("*") if p.is_file()}
