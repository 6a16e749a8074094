"""File Feed: consuming a feed's listing and publishing updates, against plain boto3 / pyarrow.

    python bench/bench_feed.py [--updates 100] [--parts 10] [--size-mb 128] [--repeat 5] [--quick]

Against an S3 server (a moto server started here on loopback unless ``--endpoint`` names one):

- consume: what a ``fileFeed`` pull does before downloading anything (list the feed, find its
  updates, check each ``_SUCCESS`` count against the files listed) for a feed of ``--updates``
  updates of ``--parts`` part files, vs listing the same objects with boto3's
  ``list_objects_v2`` paginator alone; both start by making their S3 client, as a pull does.
  Target: < 2x.
- publish: ``coord publish`` of a dataset of ``--size-mb`` MB in 8 blocks, vs uploading the
  same part files with ``pyarrow.fs.copy_files``. Target: throughput >= 0.8x.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import S3_ENV, print_table, start_moto

from coordinator.data.hashing import logical_hash
from coordinator.ingest.fetch_feed import plan
from coordinator.metadata import objects as o
from coordinator.metadata.timestamps import TimeInterval
from coordinator.repository import open_url
from coordinator.repository.publish import publish
from coordinator.workspace import Workspace
from coordinator.workspace.fsutil import physical_hash

BUCKET = "bench-feed"
DS = "org.example.feed"
ROW_BYTES = 1024


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def build_feed(client, prefix: str, updates: int, parts: int) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for u in range(updates):
        name = (start + timedelta(hours=u)).strftime("%Y%m%d.%H%M%S")
        for p in range(parts):
            client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}/part-{p:05d}.csv",
                              Body=f"name,value\nu{u}p{p},{p}\n".encode())
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}/_SUCCESS", Body=str(parts).encode())


def boto3_listing(endpoint: str, prefix: str) -> int:
    """What coord does at the start of a pull, minus the feed logic: a client, then a listing."""
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://{endpoint}")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/")
    return sum(len(page.get("Contents", ())) for page in pages)


def build_dataset(ws: Workspace, size_mb: int, blocks: int) -> None:
    """A root dataset of ``blocks`` slices of random printable text (incompressible enough)."""
    rng = np.random.default_rng(7)
    rows = max(1, size_mb * (1 << 20) // ROW_BYTES // blocks)
    ds = ws.dataset(DS)
    source = o.DatasetSourceRoot(fetch=o.FetchStepUrl(url="file:///dev/null"),
                                 read=o.ReadStepParquet(), merge=o.MergeStrategyAppend())
    base = datetime(2024, 1, 1, tzinfo=UTC)
    with ds.writer() as w:
        w.commit(o.MetadataBlock(system_time=base, source=source))
        for b in range(blocks):
            t = base + timedelta(minutes=b + 1)
            text = rng.integers(33, 127, size=rows * ROW_BYTES, dtype=np.uint8).tobytes()
            table = pa.table({
                "system_time": pa.array([t] * rows, pa.timestamp("us", tz="UTC")),
                "event_time": pa.array([t] * rows, pa.timestamp("us", tz="UTC")),
                "payload": pa.array([text[i * ROW_BYTES:(i + 1) * ROW_BYTES].decode()
                                     for i in range(rows)]),
            })
            path = ws.run_dir / f"slice-{b}.parquet"
            pq.write_table(table, path)
            s = o.DataSlice(hash=logical_hash(table), interval=TimeInterval.singleton(t),
                            num_records=rows, physical_hash=physical_hash(path))
            w.commit(o.MetadataBlock(system_time=t, output_slice=s, output_watermark=t),
                     data_file=path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=100)
    ap.add_argument("--parts", type=int, default=10)
    ap.add_argument("--size-mb", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="32 MB to publish, 3 repeats")
    ap.add_argument("--endpoint", help="an S3-compatible server (default: start moto here)")
    args = ap.parse_args()
    if args.quick:
        args.size_mb, args.repeat = 32, 3
    os.environ.update({k: v for k, v in S3_ENV.items() if k not in os.environ})

    moto, endpoint = (None, args.endpoint) if args.endpoint else start_moto()
    tmp = Path(tempfile.mkdtemp(prefix="bench-feed-"))
    try:
        io = open_url(f"s3+http://{endpoint}/{BUCKET}")
        client = io.client
        client.create_bucket(Bucket=BUCKET)
        rows = []

        build_feed(client, "feed/v1.0", args.updates, args.parts)
        step = o.FetchStepFileFeed(url=f"s3+http://{endpoint}/{BUCKET}/feed/v1.0/")
        taken = len(plan(step, None)[1].take)
        assert taken == args.updates, taken
        objects = boto3_listing(endpoint, "feed/v1.0")
        consume = statistics.median(timed(lambda: plan(step, None)) for _ in range(args.repeat))
        listing = statistics.median(timed(lambda: boto3_listing(endpoint, "feed/v1.0"))
                                    for _ in range(args.repeat))
        rows.append({"operation": f"consume: list + validate {args.updates} updates",
                     "objects": objects, "coord s": consume, "baseline": "boto3 client + list_objects_v2",
                     "baseline s": listing, "ratio": consume / listing, "target": "< 2x",
                     "ok": "yes" if consume / listing < 2 else "NO"})

        ws = Workspace.init(tmp / "publisher")
        build_dataset(ws, args.size_mb, 8)
        pub, raw, mb = [], [], 0.0
        for i in range(args.repeat):
            url = f"s3+http://{endpoint}/{BUCKET}/pub{i}/"
            (ws.meta / "cache" / DS / "published.json").unlink(missing_ok=True)
            pub.append(timed(lambda url=url: publish(ws, DS, url)))
            staging = tmp / f"parts{i}"  # the same bytes, uploaded raw
            pafs.copy_files(f"{BUCKET}/pub{i}", str(staging), source_filesystem=io.fs)
            mb = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file()) / 1e6
            raw.append(timed(lambda i=i, d=staging: pafs.copy_files(
                str(d), f"{BUCKET}/raw{i}", destination_filesystem=io.fs)))
            for prefix in (f"pub{i}", f"raw{i}"):  # the server keeps everything in memory
                io.fs.delete_dir(f"{BUCKET}/{prefix}")
            shutil.rmtree(staging)
        p, r = statistics.median(pub), statistics.median(raw)
        rows.append({"operation": f"publish: 8 blocks, {mb:,.0f} MB", "objects": 8 * 3,
                     "coord s": p, "baseline": "pyarrow copy_files of the parts", "baseline s": r,
                     "ratio": r / p, "target": "≥ 0.8 throughput",
                     "ok": "yes" if r / p >= 0.8 else "NO"})
        print_table(rows, title=f"feed: median of {args.repeat}, S3 at {endpoint}")
    finally:
        if moto is not None:
            moto.terminate()
            moto.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
