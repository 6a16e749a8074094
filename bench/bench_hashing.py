"""Logical and physical hash throughput against raw hashlib SHA3-256 over the same bytes.

    python bench/bench_hashing.py [rows]

The logical hash renders, sorts and hashes canonical text; the goal is at least half the
speed of hashlib alone over that text (see ENVIRONMENT.md "Measuring": SHA3 bounds hashing).
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import median_time, print_table

from coordinator.data.hashing import canonical_text, logical_hash, physical_hash

REPEAT = 5


def make_table(rows: int, seed: int = 42) -> pa.Table:
    """A deterministic slice resembling ingested events: mostly ordered times, some ties."""
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


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_500_000
    table = make_table(rows)
    text = canonical_text(table)
    mb = len(text) / 1e6

    t_logical = median_time(lambda: logical_hash(table), REPEAT)
    t_text = median_time(lambda: hashlib.sha3_256(text).digest(), REPEAT)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "slice.parquet"
        pq.write_table(table, path)
        data = path.read_bytes()
        t_physical = median_time(lambda: physical_hash(path), REPEAT)
        t_file = median_time(lambda: hashlib.sha3_256(data).digest(), REPEAT)
    file_mb = len(data) / 1e6

    print_table([
        {"measure": "logical_hash", "MB": mb, "median s": t_logical, "MB/s": mb / t_logical,
         "rows/s": rows / t_logical, "vs raw SHA3": f"{t_text / t_logical:.0%}"},
        {"measure": "raw SHA3 of canonical text", "MB": mb, "median s": t_text,
         "MB/s": mb / t_text, "rows/s": rows / t_text, "vs raw SHA3": "100%"},
        {"measure": "physical_hash (Parquet file)", "MB": file_mb, "median s": t_physical,
         "MB/s": file_mb / t_physical, "rows/s": rows / t_physical,
         "vs raw SHA3": f"{t_file / t_physical:.0%}"},
        {"measure": "raw SHA3 of file bytes", "MB": file_mb, "median s": t_file,
         "MB/s": file_mb / t_file, "rows/s": rows / t_file, "vs raw SHA3": "100%"},
    ], title=f"Hashing {rows:,} rows, median of {REPEAT} runs")


if __name__ == "__main__":
    main()
