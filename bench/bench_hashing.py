"""Logical and physical hash throughput against raw hashlib SHA3-256 over the same bytes.

    python bench/bench_hashing.py [rows]

The logical hash renders, sorts and hashes canonical text; the goal is at least half the
speed of hashlib alone over that text (SHA3 bounds hashing).
"vs raw" compares medians measured in the same run; CPU time (all threads) is shown too.
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import median_time, print_table

from coordinator.data.hashing import canonical_text, logical_hash
from coordinator.workspace.fsutil import physical_hash

REPEAT = 5


def make_table(rows: int, seed: int = 42) -> pa.Table:
    """A deterministic slice resembling ingested events: roughly ordered times, some ties."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64)
    steps = rng.choice([0, 1_000_000, 2_500_000, 60_000_000], size=rows, p=[0.1, 0.5, 0.3, 0.1])
    event_us = start + np.cumsum(steps)
    # Ingested data is only roughly ordered: swap a tenth of neighbouring rows.
    swap = np.flatnonzero(rng.random(rows - 1) < 0.1)
    event_us[swap], event_us[swap + 1] = event_us[swap + 1], event_us[swap].copy()
    # A few values need escaping, as in real text data.
    cities = np.array(["Vancouver", "Toronto", "Montréal", "São Paulo", "New York", "Zürich",
                       "Köln", "Tab\there", "Line\nbreak", "C:\\path"])
    weights = np.array([0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.097, 0.001, 0.001, 0.001])
    return pa.table({
        "system_time": pa.array(np.full(rows, start), pa.timestamp("us", tz="UTC")),
        "event_time": pa.array(event_us, pa.timestamp("us", tz="UTC")),
        "id": pa.array(rng.integers(0, 10**9, rows), pa.int64()),
        "price": pa.array(np.round(rng.lognormal(3, 1, rows), 2), pa.float64()),
        "city": pa.array(rng.choice(cities, size=rows, p=weights), pa.string()),
        "day": pa.array((event_us // 86_400_000_000).astype(np.int32), pa.date32()),
    })


def row(measure: str, mb: float, rows: int, wall: float, cpu: float, raw_wall: float) -> dict:
    return {"measure": measure, "MB": mb, "wall s": wall, "CPU s": cpu, "MB/s": mb / wall,
            "rows/s": rows / wall, "vs raw": f"{raw_wall / wall:.0%}"}


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_500_000
    table = make_table(rows)
    text = canonical_text(table)
    mb = len(text) / 1e6

    def timed(fn) -> tuple[float, float]:
        return median_time(fn, REPEAT), median_time(fn, REPEAT, clock=time.process_time)

    logical = timed(lambda: logical_hash(table))
    raw_text = timed(lambda: hashlib.sha3_256(text).digest())

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "slice.parquet"
        pq.write_table(table, path)
        data = path.read_bytes()
        physical = timed(lambda: physical_hash(path))
        raw_file = timed(lambda: hashlib.sha3_256(data).digest())
    file_mb = len(data) / 1e6

    print_table([
        row("logical_hash", mb, rows, *logical, raw_text[0]),
        row("raw SHA3 (same text)", mb, rows, *raw_text, raw_text[0]),
        row("physical_hash (Parquet)", file_mb, rows, *physical, raw_file[0]),
        row("raw SHA3 (file bytes)", file_mb, rows, *raw_file, raw_file[0]),
    ], title=f"Hashing {rows:,} rows; medians of {REPEAT} runs")
    print(f"logical_hash CPU time vs raw SHA3 CPU time: {raw_text[1] / logical[1]:.0%}")


if __name__ == "__main__":
    main()
