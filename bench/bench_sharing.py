"""Push, pull and verify throughput against plain pyarrow / hashlib over the same files.

    python bench/bench_sharing.py [--size-mb 512] [--slices 8] [--repeat 3] [--endpoint HOST:PORT]

A dataset of ``--slices`` Parquet slices (random printable text, so it neither compresses nor
costs much to generate) is pushed to and pulled from an S3 server: a moto server started here
on loopback unless ``--endpoint`` names one. Baselines, measured in the same run:
``pyarrow.fs.copy_files`` of the same data files up and down, and hashlib SHA3-256 over them
on one thread. Targets: push/pull ≥ 0.8 of the copy, ``verify --integrity`` ≥ 0.7 of hashlib
(``--deep`` also recomputes every logical hash: shown for scale, no target).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import S3_ENV, print_table, start_moto

from coordinator.data.hashing import logical_hash
from coordinator.metadata import objects as o
from coordinator.metadata.ids import DatasetRef
from coordinator.metadata.timestamps import TimeInterval, now_utc
from coordinator.repository import add_repository, open_url, pull_from_repository, push_dataset
from coordinator.trust.verify import verify_dataset
from coordinator.workspace import Workspace
from coordinator.workspace.fsutil import physical_hash

DS = "org.example.bench"
OPERATIONS = {"push": "push", "pull": "pull", "verify": "verify --integrity",
              "deep": "verify --integrity --deep"}
ROW_BYTES = 1024


def make_slice(rows: int, index: int) -> pa.Table:
    """Deterministic rows of 1 KiB random printable text, in event-time order."""
    rng = np.random.default_rng(index)
    text = rng.integers(33, 127, size=rows * ROW_BYTES, dtype=np.uint8)
    offsets = np.arange(rows + 1, dtype=np.int32) * ROW_BYTES
    payload = pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    start = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1e6) + index * rows * 1_000_000
    event = np.arange(start, start + rows * 1_000_000, 1_000_000, dtype=np.int64)
    return pa.table({
        "system_time": pa.array(np.full(rows, event[0]), pa.timestamp("us", tz="UTC")),
        "event_time": pa.array(event, pa.timestamp("us", tz="UTC")),
        "payload": payload,
    })


def build_dataset(ws: Workspace, size_mb: int, slices: int) -> list[Path]:
    source = o.DatasetSourceRoot(fetch=o.FetchStepUrl(url="file:///dev/null"),
                                 read=o.ReadStepCsv(), merge=o.MergeStrategyAppend())
    ds = ws.dataset(DS)
    rows = max(1, size_mb * 1_000_000 // slices // ROW_BYTES)
    with ds.writer() as w:
        w.commit(o.MetadataBlock(system_time=now_utc(), source=source))
        for i in range(slices):
            table, t = make_slice(rows, i), now_utc()
            path = ws.run_dir / f"slice-{i}.parquet"
            pq.write_table(table, path, compression="none")
            s = o.DataSlice(hash=logical_hash(table), interval=TimeInterval.singleton(t),
                            num_records=rows, physical_hash=physical_hash(path))
            w.commit(o.MetadataBlock(system_time=t, output_slice=s, output_watermark=t), data_file=path)
    return ds.data_files()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def sha3_files(files: list[Path]) -> None:
    for f in files:
        with open(f, "rb") as fh:
            h = hashlib.sha3_256()
            while chunk := fh.read(1 << 20):
                h.update(chunk)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--slices", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--endpoint", help="an S3-compatible server (default: start moto here)")
    args = ap.parse_args()
    os.environ.update({k: v for k, v in S3_ENV.items() if k not in os.environ})

    moto, endpoint = (None, args.endpoint) if args.endpoint else start_moto()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sharing-"))
    try:
        bucket = "bench-sharing"
        io = open_url(f"s3+http://{endpoint}/{bucket}")
        io.client.create_bucket(Bucket=bucket)
        s3 = io.fs
        ws = Workspace.init(tmp / "publisher")
        files = build_dataset(ws, args.size_mb, args.slices)
        mb = sum(f.stat().st_size for f in files) / 1e6
        times: dict[str, list[float]] = {k: [] for k in
                                         ("push", "upload", "pull", "download", "verify", "deep", "sha3")}
        for i in range(args.repeat):
            url = f"s3+http://{endpoint}/{bucket}/run{i}"
            add_repository(ws, f"run{i}", url)
            consumer = Workspace.init(tmp / f"consumer{i}")
            add_repository(consumer, "bench", url)
            staging = tmp / f"raw{i}"
            staging.mkdir()
            times["push"].append(timed(lambda i=i: push_dataset(ws, DS, f"run{i}")))
            times["upload"].append(timed(lambda i=i: pafs.copy_files(
                str(files[0].parent), f"{bucket}/raw{i}", destination_filesystem=s3)))
            times["pull"].append(timed(lambda c=consumer: pull_from_repository(
                c, DatasetRef.parse(f"bench/{DS}"))))
            times["download"].append(timed(lambda i=i, d=staging: pafs.copy_files(
                f"{bucket}/raw{i}", str(d), source_filesystem=s3)))
            times["verify"].append(timed(lambda: verify_dataset(ws, DS, integrity_only=True)))
            times["deep"].append(timed(lambda: verify_dataset(ws, DS, integrity_only=True, deep=True)))
            times["sha3"].append(timed(lambda: sha3_files(files)))
            for prefix in (f"run{i}", f"raw{i}"):  # the server keeps everything in memory
                s3.delete_dir(f"{bucket}/{prefix}")

        med = {k: statistics.median(v) for k, v in times.items()}
        rows = []
        for op, base, label, target in (
            ("push", "upload", "pyarrow copy_files up", 0.8),
            ("pull", "download", "pyarrow copy_files down", 0.8),
            ("verify", "sha3", "hashlib SHA3-256, 1 thread", 0.7),
            ("deep", "sha3", "hashlib SHA3-256, 1 thread", None),
        ):
            ratio = med[base] / med[op]
            rows.append({
                "operation": OPERATIONS[op], "MB": mb, "coord MB/s": mb / med[op], "baseline": label,
                "baseline MB/s": mb / med[base], "ratio": ratio,
                "target": f"≥ {target}" if target else "-",
                "ok": "-" if target is None else "yes" if ratio >= target else "NO",
            })
        print_table(rows, title=f"sharing: {args.slices} slices, {mb:,.0f} MB, median of {args.repeat}, "
                                f"S3 at {endpoint}")
    finally:
        if moto is not None:
            moto.terminate()
            moto.wait(timeout=10)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    main()
