"""`coord sql` against DuckDB reading the same Parquet files directly.

    python bench/bench_sql.py [--repeat N] [--quick]

The demo's roots are ingested as bench_cli does (336,776 flights in 12 monthly slices), then
one GROUP BY runs two ways, the runs interleaved:
- whole processes: `coord sql -o csv -c QUERY` against `python -c` that imports DuckDB and
  runs the same query over `read_parquet([the slices])`, both printing CSV;
- in-process: `SqlSession` (reads the chains, creates the views, locks the connection down,
  runs the query) against a fresh DuckDB connection running it over the files.
Target: `coord sql` within 2x of DuckDB alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this checkout's coordinator
from bench_cli import ROOT, alternate, coord_command, demo_workspace, run
from common import print_table

GROUP_BY = ("SELECT origin, carrier, count(*) AS flights, avg(dep_delay) AS mean_delay "
            "FROM {table} GROUP BY origin, carrier ORDER BY origin, carrier")
DUCKDB = """
import sys, duckdb
files = sys.argv[2:]
duckdb.sql(sys.argv[1].format(table="read_parquet(" + repr(files) + ")")).write_csv("/dev/stdout")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 runs each")
    args = ap.parse_args()
    repeat = 3 if args.quick else args.repeat
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    import duckdb
    import pyarrow as pa

    from coordinator.query.sql import SqlSession, slice_files
    from coordinator.workspace import Workspace

    with tempfile.TemporaryDirectory() as tmp:
        ws_root = demo_workspace(Path(tmp), env)
        ws = Workspace.open(ws_root)
        files = [str(f) for f in slice_files(ws)["nyc.flights"]]
        query = GROUP_BY.format(table='"nyc.flights"')

        def direct(con: duckdb.DuckDBPyConnection) -> pa.Table:
            relation = con.sql(GROUP_BY.format(table=f"read_parquet({files!r})"))
            assert relation is not None
            return relation.to_arrow_table()

        def coord_in_process() -> None:
            with SqlSession(ws) as session:
                list(session.run(query))

        def duckdb_in_process() -> None:
            with duckdb.connect() as con:
                direct(con)

        # same answer both ways, or the timing means nothing
        with SqlSession(ws) as session:
            ours = next(session.run(query))
        with duckdb.connect() as con:
            theirs = direct(con)
        assert ours.equals(theirs) and sum(ours["flights"].to_pylist()) == 336_776

        whole = alternate({
            "coord sql -c (whole process)": lambda: run(
                [*coord_command(), "sql", "-o", "csv", "-c", query], ws_root, env),
            "python + duckdb over the files (whole process)": lambda: run(
                [sys.executable, "-c", DUCKDB, GROUP_BY, *files], ws_root, env),
        }, repeat)
        inner = alternate({"SqlSession (in-process)": lambda: _timed(coord_in_process),
                           "duckdb over the files (in-process)": lambda: _timed(duckdb_in_process)},
                          repeat)
    rows = []
    for medians, ours_name in ((whole, "coord sql -c (whole process)"), (inner, "SqlSession (in-process)")):
        base_wall, base_cpu = next(t for name, t in medians.items() if name != ours_name)
        for name, (wall, cpu) in medians.items():
            rows.append({"GROUP BY over 336,776 flights": name, "wall s": wall, "CPU s": cpu,
                         "wall vs duckdb": wall / base_wall, "CPU vs duckdb": cpu / base_cpu,
                         "target": "<= 2x" if name == ours_name else ""})
    print_table(rows, title="coord sql vs DuckDB on the same Parquet slices")


def _timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of ``fn()`` in this process."""
    import time

    began, began_cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - began, time.process_time() - began_cpu


if __name__ == "__main__":
    main()
