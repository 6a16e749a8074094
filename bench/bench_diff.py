"""`coord diff` of two versions of a snapshot root against DuckDB computing the same diff.

    python bench/bench_diff.py [--rows N] [--changed-pct P] [--repeat R] [--quick]

A fresh current-ODF (0.39) workspace (`coord init`) and in it ``bench.snap``, the snapshot
root of bench_corrections.py (merge ``snapshot``, primary key ``id``; columns id, region, v;
a ``filesGlob`` of Parquet snapshots dated by their file names): N rows pulled, then a second
snapshot where P % of the keys changed (80 % of those a new value, 10 % deleted, 10 % added),
pulled too. Then, each a whole process, the runs alternated so that load on this shared
machine hits both alike:
- `coord diff bench.snap -o csv`: what the last pull changed, every row (the counts on
  stderr), from the dataset's chain and slices;
- DuckDB (``python -c``, the duckdb package) computing the same diff from the two states, the
  two snapshot files: a full outer join on the key, the changed columns named, every row
  written as CSV.
Wall and CPU (user + system, ``os.wait4``) seconds, medians of R runs, and their ratio
(target: at most 2x). Both answers are checked against each other (counts, and every row's
change, key and values); a difference fails the run.
"""
from __future__ import annotations

import argparse
import compileall
import statistics
import sys
import tempfile
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).parent))
from bench_cli import ROOT
from bench_corrections import SNAP, Coord, Data, Took, write_manifests
from common import print_table

COLUMNS = ("id", "region", "v")
TARGET = 2.0
UNQUOTED = "replace(changed, '\"', '')"  # coord's CSV quotes a list's strings, DuckDB's does not

# the diff as coord diff -o csv gives it: change, changed columns, old.C and new.C
DUCKDB_DIFF = """
import sys, duckdb
a, b = sys.argv[1:3]
duckdb.sql(f'''
COPY (
  SELECT CASE WHEN a.id IS NULL THEN 'added' WHEN b.id IS NULL THEN 'removed' ELSE 'changed' END AS change,
         CASE WHEN a.id IS NOT NULL AND b.id IS NOT NULL THEN list_filter(
           [CASE WHEN a.region IS DISTINCT FROM b.region THEN 'region' END,
            CASE WHEN a.v IS DISTINCT FROM b.v THEN 'v' END], lambda x: x IS NOT NULL) END AS changed,
         a.id AS "old.id", a.region AS "old.region", a.v AS "old.v",
         b.id AS "new.id", b.region AS "new.region", b.v AS "new.v"
  FROM read_parquet('{a}') a FULL JOIN read_parquet('{b}') b ON a.id = b.id
  WHERE a.id IS NULL OR b.id IS NULL OR a.region IS DISTINCT FROM b.region OR a.v IS DISTINCT FROM b.v
  ORDER BY CASE change WHEN 'added' THEN 0 WHEN 'removed' THEN 1 ELSE 2 END, coalesce(b.id, a.id)
) TO '/dev/stdout' (FORMAT csv, HEADER)''')
"""


def check(coord_csv: str, duck_csv: str) -> list[str]:
    """What differs between the two answers: their rows' change, changed columns and values."""
    con = duckdb.connect()
    seen = []
    for name, text in (("c", coord_csv), ("d", duck_csv)):
        path = Path(tempfile.mkstemp(suffix=".csv")[1])
        path.write_text(text)
        cols = ", ".join(f'"{side}.{c}"' for side in ("old", "new") for c in COLUMNS)
        con.execute(f"CREATE TABLE {name} AS SELECT change, {UNQUOTED} AS changed, {cols} "
                    f"FROM read_csv('{path}', header = true, all_varchar = true)")
        path.unlink()
        seen.append(con.sql(f"SELECT change, count(*) FROM {name} GROUP BY ALL ORDER BY ALL").fetchall())
    problems = [] if seen[0] == seen[1] else [f"counts: coord {seen[0]}, DuckDB {seen[1]}"]
    for x, y in (("c", "d"), ("d", "c")):
        [(n,)] = con.sql(f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL SELECT * FROM {y})").fetchall()
        if n:
            problems.append(f"{n} rows of {'coord' if x == 'c' else 'DuckDB'} not in the other's answer")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the first snapshot")
    ap.add_argument("--changed-pct", type=float, default=1.0, help="keys changed in the second, %%")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each (the median is shown)")
    ap.add_argument("--quick", action="store_true", help="100,000 rows, 3 runs")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.repeat = 100_000, 3
    changed = max(10, int(args.rows * args.changed_pct / 100))
    compileall.compile_dir(ROOT / "coordinator", quiet=1)  # as pip does when it installs

    with tempfile.TemporaryDirectory(prefix="bench-diff-") as tmp:
        home = Path(tmp)
        coord = Coord(home)
        coord("init")
        data = Data(home, args.rows, changed, events=1, regions=100)
        write_manifests(home, "")
        coord("add", f"{SNAP}.yaml")
        for step in (0, 1):
            data.write_step(step)
            coord("pull", SNAP)
        old, new = data.snapshot_files

        duck = Coord(home, [sys.executable, "-c", DUCKDB_DIFF, str(old), str(new)])
        contenders = {"coord diff -o csv": lambda: coord("diff", SNAP, "-o", "csv"),
                      "DuckDB: full outer join of the two snapshots": lambda: duck()}
        runs: dict[str, list[Took]] = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                runs[name].append(fn())
        answers = [t[-1].out for t in runs.values()]
        counts = next(line for line in answers[0].splitlines() if " added, " in line)
        problems = check(*map(_csv, answers))

    med = statistics.median
    rows = [{"command": name, "wall s": med(t.wall for t in took), "CPU s": med(t.cpu for t in took),
             "peak RSS MB": med(t.rss_mb for t in took)} for name, took in runs.items()]
    base = rows[1]
    for r in rows:
        r["wall vs DuckDB"] = r["wall s"] / base["wall s"]
        r["CPU vs DuckDB"] = r["CPU s"] / base["CPU s"]
    print_table(rows, title=f"the diff of two versions of {args.rows:,} rows, {changed:,} keys changed "
                            f"({counts.split(':')[0]}), every row as CSV: medians of {args.repeat} "
                            f"runs, each a whole process (target: at most {TARGET:g}x DuckDB's wall)")
    if problems:
        raise SystemExit("WRONG ANSWER:\n" + "\n".join(problems))
    print("checked: coord diff's rows equal DuckDB's (counts, changes, keys, old and new values)")


def _csv(out: str) -> str:
    """The CSV of a run's output (coord's counts line, on stderr, comes after it)."""
    return "\n".join(line for line in out.splitlines() if " added, " not in line) + "\n"


if __name__ == "__main__":
    main()
