"""`coord compact`: reads of a root fed many small appends, before and after its slices are merged.

    python bench/bench_compact.py [--slices N] [--rows R] [--repeat K] [--quick]

A fresh current-ODF (0.39) workspace (`coord init`) with ``ev``, a root fed by its push source
(CSV: t, k, v; merge append), given N appends of R records (`coord ingest`, run in this process
to build the workspace: 2,000 processes would take half an hour), and ``even``, a derivative
over it (``SELECT t, k, v FROM ev WHERE k % 2 = 0``, Spark), not pulled: the manifests of
``examples/compaction/``. The warm engine is
kept between commands (`coord config set engine.keepWarm 30m`, stopped at the end). Then, each
a whole `coord` process, alternated before/after so that load on this shared machine hits both
alike, medians of K runs:
- `coord sql` of a count, a sum and an MD5 over every record (the answers must be equal);
- the derivative's first step (`coord pull even` after `coord reset even` to its definition;
  each workspace's warm engine started by one such step before any is timed), which reads
  every slice of ``ev`` (its answer's count and sum must be equal): after the compaction the
  engine is given the one compacted file;
- `coord compact ev` itself (on a fresh copy of the uncompacted workspace each run).

``--workspace DIR`` keeps the built workspace (building 2,000 slices takes about 30 minutes
on a shared two-core machine: each ingest reads the whole chain) for the next run.
Wall and CPU (user + system) seconds, and after / before.
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_cli import ROOT
from bench_corrections import Coord, Took
from common import print_table

EXAMPLE = ROOT / "examples" / "compaction"  # ev.yaml and even.yaml
SQL = ("SELECT count(*) AS n, sum(k) AS s, md5(string_agg(concat_ws('|', \"offset\", t, k, v), ',' "
       "ORDER BY \"offset\")) AS h FROM ev")


def build(home: Path, slices: int, rows: int) -> None:
    """The workspace: ``ev`` with ``slices`` appends of ``rows`` records, ``even`` defined."""
    from coordinator.cli.main import main

    here = Path.cwd()
    os.chdir(home)
    try:
        for args in (["init", "--odf", "0.39", "."], ["config", "set", "engine.keepWarm", "30m"]):
            _run(main, args)
        _run(main, ["add", str(EXAMPLE / "ev.yaml"), str(EXAMPLE / "even.yaml")])
        feed = home / "feed.csv"
        for i in range(slices):
            feed.write_text("t,k,v\n" + "".join(
                f"2026-01-01T00:00:00Z,{i * rows + j},v{i}-{j}\n" for j in range(rows)))
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                _run(main, ["ingest", "ev", str(feed)])
            if i % 200 == 199:
                print(f"  {i + 1} slices", file=sys.stderr)
    finally:
        os.chdir(here)


def _run(main, args: list[str]) -> None:
    try:
        main(args)
    except SystemExit as e:
        if e.code not in (0, None):
            raise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=100, help="records per slice")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each (the median is shown)")
    ap.add_argument("--quick", action="store_true", help="200 slices, 2 runs")
    ap.add_argument("--workspace", type=Path,
                    help="keep the built (uncompacted) workspace here and use it again when it exists")
    args = ap.parse_args()
    if args.quick:
        args.slices, args.repeat = 200, 2
    compileall.compile_dir(ROOT / "coordinator", quiet=1)  # as pip does when it installs

    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        built = args.workspace or Path(tmp) / "built"
        if not (built / ".coord").exists():
            built.mkdir(parents=True, exist_ok=True)
            build(built, args.slices, args.rows)
        before, after = Path(tmp) / "before", Path(tmp) / "after"
        for home in (before, after):
            shutil.copytree(built, home)
        print(Coord(after)("compact", "ev").out.strip())
        defined = (before / ".coord/datasets/even/refs/head").read_text()

        def step(home: Path) -> Took:
            """The derivative's first step over every slice of ev, from its definition."""
            Coord(home)("reset", "even", defined)
            return Coord(home)("pull", "even")

        runs: dict[str, list[Took]] = {k: [] for k in (
            "sql before", "sql after", "derivative step before", "derivative step after", "compact")}
        answers: dict[str, set[str]] = {"sql": set(), "even": set()}
        try:
            for home in (before, after):  # each workspace's warm engine started before any timing
                step(home)
            for run in range(args.repeat):
                for name, home in (("before", before), ("after", after)):
                    runs[f"sql {name}"].append(took := Coord(home)("sql", "-o", "csv", "-c", SQL))
                    answers["sql"].add(took.out)
                    runs[f"derivative step {name}"].append(step(home))
                    answers["even"].add(Coord(home)("sql", "-o", "csv", "-c",
                                                    "SELECT count(*), sum(k) FROM even").out)
                fresh = Path(tmp) / f"compact-{run}"
                shutil.copytree(built, fresh)
                runs["compact"].append(Coord(fresh)("compact", "ev"))
                shutil.rmtree(fresh)
        finally:
            for home in (before, after):
                Coord(home)("system", "engines", "--stop", ok=None)
        wrong = [k for k, v in answers.items() if len(v) != 1]

    med = statistics.median
    rows = [{"command": name, "wall s": med(t.wall for t in took), "CPU s": med(t.cpu for t in took),
             "peak RSS MB": med(t.rss_mb for t in took)} for name, took in runs.items()]
    for first, then in ((rows[0], rows[1]), (rows[2], rows[3])):
        for r in (first, then):
            r["wall after/before"] = r["wall s"] / first["wall s"]
            r["CPU after/before"] = r["CPU s"] / first["CPU s"]
    print_table(rows, title=f"{args.slices:,} slices of {args.rows} records, before and after coord "
                            f"compact: medians of {args.repeat} runs, each a whole process")
    if wrong:
        raise SystemExit(f"WRONG ANSWER: the answers of {', '.join(wrong)} differ before and after")
    print("checked: the sql answers and the derivative's count and sum are equal before and after")


if __name__ == "__main__":
    main()
