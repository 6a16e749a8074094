"""A temporal join (``temporalTables``) in the sandboxed Spark engine, beside DuckDB's ASOF JOIN.

    python bench/bench_temporal_join.py [--events N] [--keys K] [--versions V] [--deliveries D] [--quick]

Events (N, random keys, evenly over 100 days) are joined with a dimension of K keys x V
versions (random times over the same days) as of each event's time, both delivered in D
steps chained through checkpoints, then a last step with a watermark past all the data
releases the events still waiting for the dimension. Beside it, the same join done once by
DuckDB's ``ASOF JOIN`` over all the data (in memory), and the invariance check's work: the
engine computing the join from all the data in one step (what ``coord verify --invariance``
runs). The row counts are checked equal.
The issue asks 1 M events x 10,000 keys x 100 versions; the defaults are what a busy 2-core
machine finishes in a few minutes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import print_table

from coordinator.engine.client import EngineClient
from coordinator.engine.port import ExecuteInput, ExecuteRequest
from coordinator.engine.runtime import start_engine
from coordinator.engine.settings import EngineSettings
from coordinator.metadata.objects import DatasetVocabulary, TemporalTable, TransformSql

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SPAN_US = 100 * 86_400 * 1_000_000
TS = pa.timestamp("us", tz="UTC")
EVENTS, DIM = "bench.events", "bench.dim"
JOIN = TransformSql(
    engine="spark",
    query=f"SELECT e.event_time, e.id, e.k, d.v FROM `{EVENTS}` AS e "
          f"JOIN `{DIM}` FOR SYSTEM_TIME AS OF e.event_time AS d ON e.k = d.k",
    temporal_tables=[TemporalTable(id=DIM, primary_key=["k"])],
)
VOCAB = DatasetVocabulary()


def tables(events: int, keys: int, versions: int) -> tuple[pa.Table, pa.Table]:
    """Events and dimension versions, each ordered by event time. Every key has a version at
    the start, so every event matches."""
    rng = np.random.default_rng(31)
    t0 = int(T0.timestamp() * 1_000_000)
    event_times = np.sort(rng.integers(0, SPAN_US, events)) + t0
    event_table = pa.table({"system_time": pa.array(np.full(events, t0), TS),
                            "event_time": pa.array(event_times, TS),
                            "id": np.arange(events, dtype=np.int64),
                            "k": rng.integers(0, keys, events, dtype=np.int64)})
    dim_times = rng.integers(1, SPAN_US, (keys, versions))
    dim_times[:, 0] = 0
    k = np.repeat(np.arange(keys, dtype=np.int64), versions)
    order = np.argsort(dim_times.ravel(), kind="stable")
    dim_table = pa.table({"system_time": pa.array(np.full(keys * versions, t0), TS),
                          "event_time": pa.array(dim_times.ravel()[order] + t0, TS),
                          "k": k[order], "v": rng.integers(0, 1_000_000, keys * versions, dtype=np.int64)})
    return event_table, dim_table


def parts(table: pa.Table, n: int) -> list[pa.Table]:
    size = -(-table.num_rows // n)
    return [table.slice(i, size) for i in range(0, table.num_rows, size)]


def duckdb_asof(events: pa.Table, dim: pa.Table) -> tuple[float, int]:
    import duckdb

    con = duckdb.connect()
    con.register("e", events)
    con.register("d", dim)
    began = time.perf_counter()  # the joined rows are made, as the engine makes them
    con.execute("CREATE TABLE joined AS SELECT e.event_time, e.id, e.k, d.v FROM e ASOF JOIN d "
                "ON e.k = d.k AND e.event_time >= d.event_time")
    seconds = time.perf_counter() - began
    [(rows,)] = con.sql("SELECT count(*) FROM joined").fetchall()
    return seconds, rows


def run_engine(event_parts: list[pa.Table], dim_parts: list[pa.Table]) -> tuple[list[float], int]:
    """Seconds of each Execute (one per delivery, then the closing one) and the rows joined."""
    far = T0 + timedelta(days=1000)
    rows, steps = 0, []
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as scratch:
        root = Path(scratch)
        (root / "data").mkdir()
        engine = start_engine(EngineSettings(runtime="sandbox"), root / "run", [root / "data"])
        try:
            with EngineClient(engine.socket_path) as client:
                checkpoint = None
                for call in range(len(event_parts) + 1):
                    closing = call == len(event_parts)
                    inputs = []
                    for name, delivered in ((EVENTS, event_parts), (DIM, dim_parts)):
                        paths = [] if closing else [root / "data" / f"{name}-{call}.parquet"]
                        if paths:
                            pq.write_table(delivered[call], paths[0])
                        inputs.append(ExecuteInput(name, VOCAB, delivered[0].schema, paths,
                                                   [(T0, far)] if closing else []))
                    request = ExecuteRequest(
                        transaction_id=f"tx{call}", dataset_id="bench.joined", inputs=inputs,
                        transform=JOIN, vocab=VOCAB, prev_checkpoint_dir=checkpoint,
                        new_checkpoint_dir=root / "run" / f"ck{call}",
                        output_data_path=root / "run" / f"out{call}.parquet",
                        system_time=T0 + timedelta(days=1000, seconds=call),
                    )
                    began = time.perf_counter()
                    rows += client.execute(request).num_records
                    steps.append(time.perf_counter() - began)
                    checkpoint = request.new_checkpoint_dir
        finally:
            engine.stop()
    return steps, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--keys", type=int, default=2_000)
    ap.add_argument("--versions", type=int, default=50)
    ap.add_argument("--deliveries", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="20,000 events x 200 keys x 10 versions")
    args = ap.parse_args()
    if args.quick:
        args.events, args.keys, args.versions = 20_000, 200, 10
    events, dim = tables(args.events, args.keys, args.versions)
    duckdb_seconds, duckdb_rows = duckdb_asof(events, dim)

    steps, rows = run_engine(parts(events, args.deliveries), parts(dim, args.deliveries))
    if rows != duckdb_rows:
        raise SystemExit(f"the engine joined {rows:,} rows, DuckDB {duckdb_rows:,}")

    whole, whole_rows = run_engine([events], [dim])  # one delivery, then the closing step
    if whole_rows != rows:
        raise SystemExit(f"in one step the engine joined {whole_rows:,} rows, step by step {rows:,}")

    total = sum(steps)
    sizes = [p.num_rows for p in parts(events, args.deliveries)] + [0]
    table = [{"step": k + 1, "new events": n, "seconds": s}
             for k, (n, s) in enumerate(zip(sizes, steps, strict=True))]
    print_table(table, title=f"temporal join, {args.events:,} events x {args.keys:,} keys x "
                             f"{args.versions} versions, {args.deliveries} deliveries + closing step")
    print_table([
        {"measure": "engine, all steps", "seconds": total, "rows": rows},
        {"measure": "engine, median step", "seconds": sorted(steps)[len(steps) // 2], "rows": ""},
        {"measure": "DuckDB ASOF JOIN, all data at once", "seconds": duckdb_seconds, "rows": duckdb_rows},
        {"measure": "ratio engine / DuckDB", "seconds": total / duckdb_seconds, "rows": ""},
        {"measure": "invariance check: the engine, all data in one step", "seconds": sum(whole),
         "rows": whole_rows},
    ])


if __name__ == "__main__":
    main()
