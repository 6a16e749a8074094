"""`coord sql` over millions of rows in a few slices, against DuckDB reading the same Parquet.

    python bench/bench_sql_scale.py [--rows N] [--slices S] [--repeat R] [--before DIR]

A fresh current-ODF workspace holds ``bench.events`` (columns id, city, v; 1,024 cities), an
append root pulled S times from a Parquet file of N/S rows: S slices (more where a pull writes
several). Then, as whole processes,
the runs interleaved, each printing CSV:
- `coord sql -o csv -c QUERY` (this checkout: DuckDB in its sandbox, its own Parquet reader);
- the same with the slices handed to DuckDB as Arrow datasets, in process (what `coord sql`
  did before, and does where no sandbox can be made): `python -c` running ``SqlSession(ws,
  sandbox=False)`` and writing its CSV as `coord sql` does;
- with ``--before DIR``, `coord sql` from the checkout at DIR (``git archive <commit>
  coordinator | tar -x -C DIR``);
- `python -c` importing DuckDB and running the query over ``read_parquet([the slices])``.
The queries: ``count(*)``, and ``GROUP BY`` the string column with a count and a sum.
Medians of the wall time, the CPU time and the peak resident memory of the process tree (its
processes' RSS summed; the descendants' CPU and the RSS sampled every 20 ms). Target: `coord
sql` within 1.3x of DuckDB for the GROUP BY.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this checkout's coordinator
from bench_cli import ROOT, coord_command
from common import print_table

from tests.support.processes import descendants

DATASET = "bench.events"
MANIFEST = f"""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {DATASET}
  source:
    kind: root
    fetch: {{kind: url, url: part.parquet}}
    read: {{kind: parquet, schema: ["id BIGINT", "city STRING", "v DOUBLE"]}}
    merge: {{kind: append}}
"""
QUERIES = {
    "count(*)": "SELECT count(*) AS n FROM {table}",
    "GROUP BY a string": ("SELECT city, count(*) AS n, sum(v) AS total FROM {table} "
                          "GROUP BY city ORDER BY city"),
}
IN_PROCESS = """
import sys
from pathlib import Path
from coordinator.cli.output import Output
from coordinator.query.sql import SqlSession, split_script
from coordinator.workspace import Workspace
with SqlSession(Workspace.open(Path.cwd()), sandbox=False) as session:
    Output("csv").records(session.query(split_script(sys.argv[1])[0], sys.argv[1]))
"""
# the peer: DuckDB over the slices, its progress bar off (drawn on stdout past 2 s otherwise)
DUCKDB = """
import sys, duckdb
duckdb.execute("SET enable_progress_bar = false")
duckdb.sql(sys.argv[1].format(table="read_parquet(" + repr(sys.argv[2:]) + ")")).write_csv("/dev/stdout")
"""
TARGET = 1.3
TICKS = os.sysconf("SC_CLK_TCK")
Run = tuple[float, float, float]  # wall s, CPU s, peak tree RSS MB


def workspace(tmp: Path, rows: int, slices: int, env: dict[str, str]) -> Path:
    ws = tmp / "ws"
    ws.mkdir()
    coord = coord_command()
    subprocess.run([*coord, "init"], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
    (ws / "events.yaml").write_text(MANIFEST)
    subprocess.run([*coord, "add", "events.yaml"], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
    each = rows // slices
    for n in range(slices):
        ids = pa.array(range(n * each, (n + 1) * each), pa.int64())
        city = pc.binary_join_element_wise("city-", pc.cast(pc.bit_wise_and(ids, 1023), pa.string()), "")
        pq.write_table(pa.table({"id": ids, "city": city, "v": pc.divide(pc.cast(ids, pa.float64()), 7.0)}),
                       ws / "part.parquet")
        subprocess.run([*coord, "pull", DATASET], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
    return ws


def sample(pid: int) -> dict[int, tuple[int, float]]:
    """Each process of ``pid``'s tree: its resident memory (KB) and CPU seconds so far."""
    seen = {}
    for p in [pid, *descendants(pid)]:
        try:
            with open(f"/proc/{p}/status") as status:
                rss = next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            seen[p] = (rss, (int(fields[11]) + int(fields[12])) / TICKS)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return seen


def run(command: list[str], cwd: Path, env: dict[str, str], expected: bytes) -> Run:
    """One whole process: wall, CPU and the peak RSS of its tree; its output must be
    ``expected`` (the same answer every way). The CPU is the process's (and its waited
    children's, from wait4) and, sampled, its descendants': bubblewrap's sandbox does not
    pass its processes' times up to their parent."""
    began = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.PIPE)
        peak, cpu = 0, {}
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            seen = sample(process.pid)
            peak = max(peak, sum(rss for rss, _ in seen.values()))
            cpu |= {p: c for p, (_, c) in seen.items() if p != process.pid}
            time.sleep(0.02)
        wall = time.perf_counter() - began
        out.seek(0)
        answer = out.read()
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    assert _rows(answer) == _rows(expected), (command, answer[:300], expected[:300])
    # (not wait4's ru_maxrss: it starts at this process's own, the resident memory it had
    # when it forked the child)
    return wall, usage.ru_utime + usage.ru_stime + sum(cpu.values()), peak / 1024


def _rows(csv: bytes) -> list[list[str]]:
    """The CSV's data rows, numbers rounded (DuckDB and Arrow print floats alike, but sums in
    another order may differ in the last digit)."""
    rows = []
    for line in csv.decode().splitlines()[1:]:
        cells = []
        for cell in line.split(","):
            try:
                cells.append(f"{float(cell):.6g}")
            except ValueError:
                cells.append(cell.strip('"'))
        rows.append(cells)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--slices", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    import duckdb

    from coordinator.query.sql import slice_files
    from coordinator.workspace import Workspace

    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp), args.rows, args.slices, env)
        files = [str(f) for f in slice_files(Workspace.open(ws))[DATASET]]
        assert len(files) >= args.slices, files  # a large pull is written as several slices
        table = f'"{DATASET}"'
        rows = []
        for name, query in QUERIES.items():
            ours = query.format(table=table)
            expected = duckdb.sql(query.format(table=f"read_parquet({files!r})")).df().to_csv(index=False)
            contenders = {
                "coord sql (DuckDB sandboxed)": [*coord_command(), "sql", "-o", "csv", "-c", ours],
                "SqlSession in process over Arrow datasets": [sys.executable, "-c", IN_PROCESS, ours],
                **({"coord sql (--before)": [*coord_command(), "sql", "-o", "csv", "-c", ours]}
                   if args.before else {}),
                "python + duckdb read_parquet (peer)": [sys.executable, "-c", DUCKDB, query, *files],
            }
            envs = {label: ({**env, "PYTHONPATH": str(args.before)} if "--before" in label else env)
                    for label in contenders}
            taken: dict[str, list[Run]] = {label: [] for label in contenders}
            for _ in range(args.repeat):
                for label, command in contenders.items():
                    taken[label].append(run(command, ws, envs[label], expected.encode()))
            medians = {label: tuple(statistics.median(r[i] for r in runs) for i in range(3))
                       for label, runs in taken.items()}
            peer = medians["python + duckdb read_parquet (peer)"][0]
            for label, (wall, cpu, rss) in medians.items():
                row = {"query": name, "whole process": label, "wall s": wall, "CPU s": cpu,
                       "peak RSS MB": rss, "x duckdb": wall / peer, "target": ""}
                if label.startswith("coord sql (DuckDB") and name.startswith("GROUP BY"):
                    row["target"] = f"<= {TARGET}x: {'met' if wall <= TARGET * peer else 'missed'}"
                rows.append(row)
    print_table(rows, title=f"coord sql over {args.rows:,} rows in {len(files)} slices ({args.slices} "
                            f"pulls), medians of {args.repeat}")


if __name__ == "__main__":
    main()
