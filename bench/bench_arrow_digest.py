"""arrow0-sha3-256 throughput beside the 0.18 logical hash and raw SHA3-256 of the file bytes.

    python bench/bench_arrow_digest.py [rows]

A flights-like slice (integers, floats, short strings, timestamps, some nulls). MB is the
table's Arrow size for the in-memory measures and the Parquet file's size for the file ones.
The last two columns compare wall times in the same run (medians): how many times as long as
raw SHA3-256 of the Parquet file's bytes, and as the in-memory arrow0 digest on 2 threads.
Raw SHA3-256 of the table's Arrow buffers is about the least the digest can cost (it hashes
each value once, plus length prefixes and null markers). CPU time (all threads) is shown too,
being steadier on a shared machine.
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import median_time, print_table

from coordinator.data.arrow_digest import RecordDigest, file_digest
from coordinator.data.hashing import file_logical_hash, logical_hash

REPEAT = 3


def make_table(rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64)
    airports = np.array(["SFO", "LAX", "JFK", "ORD", "ATL", "DFW", "DEN", "SEA", "BOS", "MIA"])
    carriers = np.array(["AA", "DL", "UA", "WN", "AS", "B6"])
    tails = np.array([f"N{i:04d}{c}" for i, c in zip(range(500), "ABCDE" * 100, strict=True)])
    delay = rng.normal(5, 30, rows).round().astype(np.int64)
    return pa.table({
        "event_time": pa.array(start + np.sort(rng.integers(0, 365 * 86_400_000_000, rows)),
                               pa.timestamp("us", tz="UTC")),
        "flight_num": pa.array(rng.integers(1, 9999, rows), pa.int32()),
        "carrier": pa.array(rng.choice(carriers, rows)),
        "origin": pa.array(rng.choice(airports, rows)),
        "dest": pa.array(rng.choice(airports, rows)),
        "tail_number": pa.array(rng.choice(tails, rows), mask=rng.random(rows) < 0.02),
        "dep_delay": pa.array(delay, mask=rng.random(rows) < 0.05),
        "distance": pa.array(rng.uniform(100, 3000, rows).round(1), pa.float64()),
        "air_time": pa.array(rng.uniform(20, 400, rows), pa.float32()),
    })


def digest(table: pa.Table, threads: int) -> bytes:
    with ThreadPoolExecutor(threads) as pool:
        d = RecordDigest(table.schema, pool if threads > 1 else None)
        d.update(table)
    return d.finish()


def _sha3_all(buffers: list[pa.Buffer]) -> bytes:
    h = hashlib.sha3_256()
    for b in buffers:
        h.update(b)
    return h.digest()


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000
    table = make_table(rows).combine_chunks()
    table_mb = table.nbytes / 1e6

    def timed(fn) -> tuple[float, float]:
        return median_time(fn, REPEAT), median_time(fn, REPEAT, clock=time.process_time)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flights.parquet"
        pq.write_table(table, path, row_group_size=1 << 20)
        data = path.read_bytes()
        file_mb = len(data) / 1e6
        buffers = [b for column in table.columns for chunk in column.chunks
                   for b in chunk.buffers() if b is not None]
        measures = [
            ("raw SHA3-256 (file bytes)", file_mb, lambda: hashlib.sha3_256(data).digest()),
            ("raw SHA3-256 (Arrow buffers)", table_mb, lambda: _sha3_all(buffers)),
            ("arrow0 digest, 1 thread", table_mb, lambda: digest(table, 1)),
            ("arrow0 digest, 2 threads", table_mb, lambda: digest(table, 2)),
            ("arrow0 file_digest", file_mb, lambda: file_digest(path)),
            ("0.18 logical_hash", table_mb, lambda: logical_hash(table)),
            ("0.18 file_logical_hash", file_mb, lambda: file_logical_hash(path)),
        ]
        results = [(name, mb, *timed(fn)) for name, mb, fn in measures]
    raw_wall = results[0][2]
    arrow_wall = results[3][2]
    print_table([
        {"measure": name, "MB": mb, "wall s": wall, "CPU s": cpu, "MB/s": mb / wall,
         "x raw file SHA3": f"{wall / raw_wall:.1f}", "x arrow0": f"{wall / arrow_wall:.2f}"}
        for name, mb, wall, cpu in results
    ], title=f"{rows:,} flights-like rows: {table_mb:,.0f} MB in Arrow, {file_mb:,.0f} MB "
             f"Parquet; medians of {REPEAT} runs")


if __name__ == "__main__":
    main()
