"""A snapshot root's state (`"<id>@state"`) against the same projection done without us.

    python bench/bench_state.py [--keys N] [--repeat N]

A snapshot root of N keys (1,000,000 by default) is pulled from three snapshots (the second
changes 1 % of the values, the third changes 1 % more and removes 1 % of the keys), then
`SELECT count(*), sum(v)` runs in-process, the runs interleaved:
- over the state, through `SqlSession` (reads the chains, creates the views, locks down);
- over the change log, through `SqlSession` (what reading the dataset costs anyway);
- DuckDB's own Parquet reader over the same slices with the same window (no stored order);
- pandas: the slices concatenated, a stable sort by event and system time, the last row per
  key, removals dropped.
All answers are checked equal before anything is timed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this checkout's coordinator
from bench_cli import ROOT, alternate, coord_command
from bench_sql import _timed
from common import print_table

MANIFEST = r"""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: bench.state
  source:
    kind: root
    fetch: {kind: filesGlob, path: "snaps/*.parquet",
            eventTime: {kind: fromPath, pattern: '(\d{4}-\d{2}-\d{2})'}}
    read: {kind: parquet, schema: ["id BIGINT", "v BIGINT"]}
    merge: {kind: snapshot, primaryKey: [id]}
"""
STATE = 'SELECT count(*) AS n, sum(v) AS s FROM "bench.state@state"'
LOG = 'SELECT count(*) AS n, sum(v) AS s FROM "bench.state"'
DIRECT = ("SELECT count(*) AS n, sum(v) AS s FROM (SELECT * FROM read_parquet({files}) QUALIFY "
          "row_number() OVER (PARTITION BY id ORDER BY event_time DESC, system_time DESC) = 1) "
          "WHERE observed <> 'D'")


def snapshots(folder: Path, keys: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    ids, values = np.arange(keys), rng.integers(0, 1000, keys)
    folder.mkdir()
    for i, day in enumerate(["2020-01-01", "2020-02-01", "2020-03-01"]):
        if i:
            values = values.copy()
            values[rng.choice(keys, keys // 100, replace=False)] += 1
        kept = np.ones(keys, dtype=bool)
        if i == 2:
            kept[rng.choice(keys, keys // 100, replace=False)] = False
        pq.write_table(pa.table({"id": ids[kept], "v": values[kept]}), folder / f"s-{day}.parquet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    import duckdb
    import pandas as pd
    import pyarrow.parquet as pq

    from coordinator.query.sql import SqlSession, slice_files
    from coordinator.workspace import Workspace

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        snapshots(home / "snaps", args.keys)
        (home / "state.yaml").write_text(MANIFEST)
        for step in (["init", "--odf", "0.18"], ["add", "state.yaml"], ["pull", "bench.state"]):
            subprocess.run([*coord_command(), *step], cwd=home, env=env, check=True,
                           stdout=subprocess.DEVNULL)
        ws = Workspace.open(home)
        files = [str(f) for f in slice_files(ws)["bench.state"]]

        def ours(query: str) -> tuple[int, int]:
            with SqlSession(ws) as session:
                n, s = next(session.run(query)).to_pylist()[0].values()
                return n, int(s)

        def direct() -> tuple[int, int]:
            with duckdb.connect() as con:
                n, s = con.sql(DIRECT.format(files=files)).fetchall()[0]
                return n, int(s)

        def pandas() -> tuple[int, int]:
            df = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
            df = df.sort_values(["event_time", "system_time"], kind="stable")
            df = df.drop_duplicates("id", keep="last")
            df = df[df.observed != "D"]
            return len(df), int(df.v.sum())

        answer = ours(STATE)
        assert answer == direct() == pandas() and answer[0] == args.keys - args.keys // 100, answer
        records = ours(LOG)[0]
        medians = alternate({
            "state, SqlSession": lambda: _timed(lambda: ours(STATE)),
            "change log, SqlSession": lambda: _timed(lambda: ours(LOG)),
            "DuckDB read_parquet, same window": lambda: _timed(direct),
            "pandas sort + drop_duplicates": lambda: _timed(pandas),
        }, args.repeat)
    base_wall = medians["pandas sort + drop_duplicates"][0]
    rows = [{f"count, sum over {args.keys:,} keys ({records:,} change records)": name, "wall s": wall,
             "CPU s": cpu, "wall vs pandas": wall / base_wall} for name, (wall, cpu) in medians.items()]
    print_table(rows, title="the state of a snapshot root")


if __name__ == "__main__":
    main()
