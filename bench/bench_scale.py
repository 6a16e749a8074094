"""Scale: peak memory and throughput of `coord pull` on inputs larger than the slice limit.

    python bench/bench_scale.py [--sizes-gb 1.3 6] [--files 4 1] [--quick] [--odf 0.39]

For each size, CSV files of that many GB in all (``--files`` of them; default one size in 4
files as a daily drop, the other as one large file) are ingested by a whole ``coord pull``
process into a fresh append root, with the default ``ingest.maxSliceBytes`` (``auto``). Beside
it, in the same run, a Python process reads each file with pyarrow's CSV reader and writes it
as Parquet (the least a pull must do). Peak memory is each process's maximum resident set
(``wait4``; this process stays small, since a child's peak counts its parent's size at
its start), throughput is GB of CSV per second of wall time.

Targets (issue 15): peak RSS < 1 GB for both sizes, the larger no higher than the smaller;
throughput within 1.5x of pyarrow's.

Then ``coord verify --integrity`` of each dataset, in MB of data files per second, beside
SHA3-256 of the same files on every core (one thread per core, ``hashlib``), the least any
check of every byte costs: ``VERIFY_REPEAT`` runs of each, alternated, medians.

Then a snapshot merge: a root with a snapshot merge pulls a first snapshot of
``--snapshot-rows`` rows, then a second one (1 % of rows changed, 0.5 % removed, 0.5 % new);
the second pull (whole process: read, diff against the state, hash and commit the changes)
is timed beside DuckDB computing the same change set from the same two CSV files with a 2 GB
memory limit. Target: within 2x of DuckDB, peak RSS < 2 GB.

``--quick``: 0.3 and 1 GB, 2 M-row snapshots. ``--odf``: the version of the large roots
(0.18 by default, as first measured; the snapshot merge stays 0.18).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).parent))
from bench_cli import coord_command
from common import print_table

from coordinator.workspace import Workspace

HERE = Path(__file__).resolve().parent
VERIFY_REPEAT = 3
DS = "bench.scale"
MANIFEST = f"""apiVersion: 1
kind: DatasetSnapshot
content:
  id: {DS}
  source:
    kind: root
    fetch: {{kind: filesGlob, path: "in/*.csv"}}
    read: {{kind: csv, header: true,
           schema: ["id BIGINT", "at TIMESTAMP", "city STRING", "amount DOUBLE", "note STRING"]}}
    merge: {{kind: append}}
  vocab: {{eventTimeColumn: at}}
"""
BASELINE = """
import sys, pyarrow.csv as c, pyarrow.parquet as p
for i, f in enumerate(sys.argv[2:]):
    p.write_table(c.read_csv(f), f"{sys.argv[1]}/{i}.parquet")
"""
CITIES = np.array(["Amsterdam", "Berlin", "Cairo", "Delhi", "Lima", "Oslo", "Quito", "Seoul"])


def write_csv(path: Path, gb: float, start: int) -> int:
    """About ``gb`` GB of rows (~70 bytes each), written in chunks; returns the rows written."""
    rng = np.random.default_rng(start)
    rows_per_chunk, written = 250_000, 0
    base = np.datetime64("2024-01-01T00:00:00", "s")
    with pacsv.CSVWriter(path, pa.schema([("id", pa.int64()), ("at", pa.timestamp("s", "UTC")),
                                          ("city", pa.string()), ("amount", pa.float64()),
                                          ("note", pa.string())])) as w:
        while path.stat().st_size < gb * 1e9:
            ids = np.arange(start + written, start + written + rows_per_chunk)
            table = pa.table({
                "id": ids,
                "at": pa.array(base + (ids // 1000).astype("timedelta64[s]"), pa.timestamp("s", "UTC")),
                "city": CITIES[rng.integers(0, len(CITIES), rows_per_chunk)],
                "amount": np.round(rng.random(rows_per_chunk) * 1000, 2),
                "note": pa.array(np.char.add("n", (ids % 9973).astype(str))),
            })
            w.write_table(table)
            written += rows_per_chunk
    return written


SNAPSHOT_MANIFEST = f"""apiVersion: 1
kind: DatasetSnapshot
content:
  id: {DS}
  source:
    kind: root
    fetch: {{kind: filesGlob, path: "in/*.csv",
            eventTime: {{kind: fromPath, pattern: 'day-(\\d{{4}}-\\d\\d-\\d\\d)\\.csv'}}}}
    read: {{kind: csv, header: true, schema: ["id BIGINT", "city STRING", "amount DOUBLE", "note STRING"]}}
    merge: {{kind: snapshot, primaryKey: [id]}}
"""
DUCKDB_DIFF = """
import sys, duckdb
con = duckdb.connect(config={"memory_limit": "2GB", "temp_directory": sys.argv[1]})
cols = "{'id': 'BIGINT', 'city': 'VARCHAR', 'amount': 'DOUBLE', 'note': 'VARCHAR'}"
prev, cur = (f"read_csv('{path}', header=true, columns={cols})" for path in sys.argv[2:4])
con.execute(f\"\"\"COPY (
  SELECT CASE WHEN p.id IS NULL THEN 'I' ELSE 'U' END AS observed, c.*
  FROM {cur} c LEFT JOIN {prev} p USING (id)
  WHERE p.id IS NULL OR c.city IS DISTINCT FROM p.city OR c.amount IS DISTINCT FROM p.amount
     OR c.note IS DISTINCT FROM p.note
  UNION ALL SELECT 'D', p.* FROM {prev} p ANTI JOIN {cur} c USING (id)
) TO '{sys.argv[4]}' (FORMAT parquet)\"\"\")
"""


def write_snapshot(path: Path, rows: int, day: int) -> None:
    """Day 1: ids 0..rows-1. Day 2: 0.5 % removed, 1 % changed, 0.5 % new."""
    ids = np.arange(rows, dtype=np.int64)
    if day == 2:
        ids = np.concatenate([ids[ids % 200 != 0], np.arange(rows, rows + rows // 200)])
    amount = np.round((ids % 10007) * 1.25, 2)
    if day == 2:
        amount = np.where(ids % 100 == 1, amount + 1, amount)
    table = pa.table({"id": ids, "city": CITIES[ids % len(CITIES)], "amount": amount,
                      "note": pa.array(np.char.add("n", (ids % 9973).astype(str)))})
    pacsv.write_csv(table, path)


def bench_snapshot(tmp: Path, rows: int, coord: list[str], env: dict) -> dict:
    ws = tmp / "snapshot"
    (ws / "in").mkdir(parents=True)
    days = [ws / "in" / f"day-2024-01-0{d}.csv" for d in (1, 2)]
    for d, path in enumerate(days, start=1):
        in_child(write_snapshot, path, rows, d)
    (ws / "m.yaml").write_text(SNAPSHOT_MANIFEST)
    for step in (["init", "--odf", "0.18"], ["add", "m.yaml"]):
        subprocess.run([*coord, *step], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
    held = tmp / "held"
    held.mkdir()
    days[1].rename(held / days[1].name)  # the first pull sees day 1 only
    first, first_rss = measured([*coord, "pull", DS], ws, env)
    (held / days[1].name).rename(days[1])
    second, rss = measured([*coord, "pull", DS], ws, env)
    spill = tmp / "duckdb-spill"
    spill.mkdir()
    duck, duck_rss = measured([sys.executable, "-c", DUCKDB_DIFF, str(spill), str(days[0]),
                               str(days[1]), str(tmp / "changes.parquet")], ws, env)
    state = Workspace.open(ws).dataset(DS).state()
    shutil.rmtree(ws)
    return {"snapshots": f"2 x {rows:,} rows", "first pull s": first, "first peak GB": first_rss,
            "diff pull s": second, "peak RSS GB": rss, "changes": state.num_records - rows,
            "DuckDB diff s (2 GB limit)": duck, "DuckDB peak GB": duck_rss,
            "ratio": second / duck, "targets": "ratio ≤ 2; RSS < 2 GB",
            "met": "yes" if second / duck <= 2 and rss < 2 else "no"}


def in_child(fn, *args):
    """``fn(*args)`` in a fresh process: a child's peak RSS counts its parent's size when it
    was started, so this process stays small."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def sha3_all_cores(files: list[Path]) -> None:
    """SHA3-256 of each file, as many files at once as there are cores."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    def one(path: Path) -> bytes:
        h = hashlib.sha3_256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        return h.digest()

    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        list(pool.map(one, files))


def measured(command: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of one process."""
    began = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{command[:3]} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_maxrss * 1024 / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-gb", type=float, nargs="*", default=[1.3, 6.0],
                    help="none: the snapshot merge only")
    ap.add_argument("--files", type=int, nargs="+", default=[4, 1], help="files per size")
    ap.add_argument("--quick", action="store_true", help="0.3 and 1 GB")
    ap.add_argument("--snapshot-rows", type=int, default=20_000_000)
    ap.add_argument("--odf", choices=["0.18", "0.39"], default="0.18", help="the roots' ODF version")
    args = ap.parse_args()
    if args.quick:
        args.sizes_gb, args.snapshot_rows = [0.3, 1.0], 2_000_000
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent),
                                                                      os.environ.get("PYTHONPATH")]))}
    coord = coord_command()
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=os.environ.get("BENCH_TMP")))
    rows, checks = [], []
    try:
        for gb, files in zip(args.sizes_gb, args.files, strict=False):
            ws = tmp / f"{gb}gb"
            (ws / "in").mkdir(parents=True)
            paths, records = [], 0
            for k in range(files):
                paths.append(ws / "in" / f"part-{k}.csv")
                records += in_child(write_csv, paths[-1], gb / files, records)
            size = sum(p.stat().st_size for p in paths) / 1e9
            (ws / "m.yaml").write_text(MANIFEST)
            for step in (["init", "--odf", args.odf], ["add", "m.yaml"]):
                subprocess.run([*coord, *step], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
            out = tmp / "baseline"
            out.mkdir()
            base_wall, base_rss = measured([sys.executable, "-c", BASELINE, str(out), *map(str, paths)],
                                           ws, env)
            shutil.rmtree(out)
            wall, rss = measured([*coord, "pull", DS], ws, env)
            if args.odf == "0.18":
                dataset = Workspace.open(ws).dataset(DS)
                blocks, data_files = len(dataset.state().data_blocks), dataset.data_files()
            else:  # a 0.39 dataset's folder: one data file per block that added data
                data_files = sorted((ws / ".coord" / "datasets").glob("*/data/*"))
                blocks = len(data_files)
            data_mb = sum(f.stat().st_size for f in data_files) / 1e6
            verifies, raws = [], []
            for _ in range(VERIFY_REPEAT):  # alternated, so load on the machine hits both alike
                verifies.append(measured([*coord, "verify", DS, "--integrity"], ws, env)[0])
                began = time.perf_counter()
                sha3_all_cores(data_files)
                raws.append(time.perf_counter() - began)
            verify, raw = statistics.median(verifies), statistics.median(raws)
            rows.append({"input": f"ODF {args.odf}: {size:.2f} GB CSV, {files} file"
                                  f"{'s' * (files > 1)}, {records:,} rows",
                         "coord pull s": wall, "GB/s": size / wall, "peak RSS GB": rss,
                         "blocks": blocks,
                         "pyarrow s": base_wall, "pyarrow peak GB": base_rss,
                         "ratio": wall / base_wall, "targets": "RSS < 1 GB; ratio ≤ 1.5",
                         "met": "yes" if rss < 1 and wall / base_wall <= 1.5 else "no"})
            checks.append({"dataset": f"{data_mb:,.0f} MB of Parquet in {blocks} files",
                           "verify --integrity MB/s": data_mb / verify,
                           "SHA3-256 on all cores MB/s": data_mb / raw, "ratio": raw / verify})
            shutil.rmtree(ws)
        if len(rows) > 1:
            rows[-1]["met"] += "" if rows[-1]["peak RSS GB"] <= rows[0]["peak RSS GB"] * 1.05 \
                else " (RSS grew with size)"
        if rows:
            print_table(rows, title="coord pull of large CSV (whole processes, default slice limit)")
            print_table(checks, title="verify of those datasets (whole process) vs raw SHA3")
        print_table([bench_snapshot(tmp, args.snapshot_rows, coord, env)],
                    title="snapshot merge of two large snapshots (whole processes)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
