"""Derivatives over a snapshot root that changes, step by step, as whole `coord` processes.

    python bench/bench_corrections.py [--rows N] [--steps S] [--changed-pct P] [--events E]
                                      [--regions R] [--quick]

A fresh current-ODF (0.39) workspace (`coord init`), the warm engine kept between commands
(`coord config set engine.keepWarm 30m`, stopped at the end; the runtime is the default,
``auto``, which `coord system engines` prints), and in it:
1. ``bench.snap``: a snapshot root (merge ``snapshot``, primary key ``id``; columns id, region,
   v), fed by a ``filesGlob`` of Parquet snapshots dated by their file names: N rows at step 0,
   then each step a new snapshot where P % of the keys changed (80 % of those a new value, 10 %
   deleted, 10 % added). Pulled with `coord pull bench.snap`; then ``bench.by-region``
   (``SELECT max(event_time), region, count(*), sum(v) ... GROUP BY region``), which a 0.39
   pull recomputes over the root's whole rows at each step (docs/architecture.md,
   "Derivatives over data that changes").
2. ``bench.events``: an append root of E events a step (event time within the day before the
   step's snapshot), and ``bench.enriched``, the events joined AS OF their event time with
   ``bench.snap`` as a temporal table (README, "Joining with reference data").
3. The baseline: ``bench.ledger``, a ledger root (primary key id) receiving as many new rows a
   step as the snapshot changes (P % of N), and ``bench.ledger-daily``, the same aggregate over
   it with a 1-day event-time window (an append-only input is computed as a stream, whose
   aggregate needs a window to emit anything: a plain GROUP BY is tried after the last step,
   its refusal printed).
4. DuckDB, in-process, computing from scratch over the same raw files: the aggregate over the
   step's snapshot file, and the join over every events file and every snapshot file (an
   ``ASOF JOIN`` finding the snapshot in force at each event's time, then the key).

Each `coord` process is timed (wall and CPU, ``os.wait4``) and its peak RSS taken by
``/usr/bin/time -f %M`` (the coordinator's own; the engine is a separate process, whose
resident memory is read from /proc after each step). Step 0 (the first load, the engine's
start) is shown apart from the others; the ratios are medians of the later steps.
A pull that fails is printed (command, time, message) and run once more, as its message
tells a user; the step's figure is the second run's. After the last step the derivatives'
rows (appends minus retractions, through `coord sql`) are checked against DuckDB's answers;
a difference fails the run.
The issue asks 1 M rows, 1 % changed, 10 steps: time per step at most 3x an append-only step
of the same size, and the ratio to DuckDB from scratch; memory flat in history size.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from bench_cli import ROOT, coord_command
from common import print_table

T0 = datetime(2024, 1, 1, tzinfo=UTC)
DAY_US = 86_400 * 1_000_000
TS = pa.timestamp("us", tz="UTC")

SNAP, BY_REGION = "bench.snap", "bench.by-region"
EVENTS, ENRICHED = "bench.events", "bench.enriched"
LEDGER, LEDGER_DAILY = "bench.ledger", "bench.ledger-daily"
TIME = "/usr/bin/time"

MANIFESTS = {
    SNAP: {"kind": "root",
           "fetch": {"kind": "filesGlob", "path": "snaps/*.parquet",
                     "eventTime": {"kind": "fromPath", "pattern": r"(\d{4}-\d{2}-\d{2})"}},
           "read": {"kind": "parquet", "schema": ["id BIGINT", "region BIGINT", "v BIGINT"]},
           "merge": {"kind": "snapshot", "primaryKey": ["id"]}},
    BY_REGION: {"kind": "derivative", "inputs": [SNAP], "transform": {
        "kind": "sql", "engine": "spark",
        "query": f"SELECT max(event_time) AS event_time, region, count(*) AS n, sum(v) AS v "
                 f"FROM `{SNAP}` GROUP BY region"}},
    EVENTS: {"kind": "root",
             "fetch": {"kind": "filesGlob", "path": "events/*.parquet"},
             "read": {"kind": "parquet", "schema": ["event_time TIMESTAMP", "eid BIGINT", "id BIGINT"]},
             "merge": {"kind": "append"}},
    ENRICHED: {"kind": "derivative", "inputs": [EVENTS, SNAP], "transform": {
        "kind": "sql", "engine": "spark",
        "temporalTables": [{"id": SNAP, "primaryKey": ["id"]}],
        "query": f"SELECT e.event_time, e.eid, e.id, s.region, s.v FROM `{EVENTS}` AS e "
                 f"JOIN `{SNAP}` FOR SYSTEM_TIME AS OF e.event_time AS s ON e.id = s.id"}},
    LEDGER: {"kind": "root",
             "fetch": {"kind": "filesGlob", "path": "ledger/*.parquet"},
             "read": {"kind": "parquet",
                      "schema": ["event_time TIMESTAMP", "id BIGINT", "region BIGINT", "v BIGINT"]},
             "merge": {"kind": "ledger", "primaryKey": ["id"]}},
}
PLAIN_LEDGER_AGG = (f"SELECT max(event_time) AS event_time, region, count(*) AS n, sum(v) AS v "
                    f"FROM `{LEDGER}` GROUP BY region")
WINDOWED_LEDGER_AGG = (f"SELECT window.end AS event_time, region, count(*) AS n, sum(v) AS v "
                       f"FROM `{LEDGER}` GROUP BY window(event_time, '1 day'), region")

# the rows a 0.39 change log describes: appends and correct-tos add one, the others take one away
SIGN = "CASE WHEN op IN (1, 2) THEN -1 ELSE 1 END"


def day(k: int) -> datetime:
    """The date of step k's snapshot (its file name): events of step k fall in the day before."""
    return T0 + timedelta(days=k)


def us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


class Data:
    """The raw files of every step, made with numpy (no loop per row), deterministic."""

    def __init__(self, home: Path, rows: int, changed: int, events: int, regions: int) -> None:
        self.home, self.changed, self.events, self.regions = home, changed, events, regions
        self.rng = np.random.default_rng(2024)
        self.ids = np.arange(rows, dtype=np.int64)
        self.region = self.rng.integers(0, regions, rows, dtype=np.int64)
        self.v = self.rng.integers(0, 1000, rows, dtype=np.int64)
        self.next_id = rows
        for folder in ("snaps", "events", "ledger"):
            (home / folder).mkdir()
        self.snapshot_files: list[Path] = []
        self.event_files: list[Path] = []
        self.ledger_files: list[Path] = []

    def write_step(self, k: int) -> None:
        if k:
            self._change()
        name = day(k).strftime("%Y-%m-%d")
        snap = self.home / "snaps" / f"s-{name}.parquet"
        pq.write_table(pa.table({"id": self.ids, "region": self.region, "v": self.v}), snap)
        self.snapshot_files.append(snap)
        # events and ledger rows within [day(k-1), day(k)): released by step k's snapshot
        start = us(day(k - 1))
        times = np.sort(self.rng.integers(0, DAY_US, self.events)) + start
        ev = self.home / "events" / f"e-{name}.parquet"
        pq.write_table(pa.table({
            "event_time": pa.array(times, TS),
            "eid": np.arange(k * self.events, (k + 1) * self.events, dtype=np.int64),
            "id": self.rng.integers(0, self.next_id, self.events, dtype=np.int64)}), ev)
        self.event_files.append(ev)
        times = np.sort(self.rng.integers(0, DAY_US, self.changed)) + start
        led = self.home / "ledger" / f"l-{name}.parquet"
        pq.write_table(pa.table({
            "event_time": pa.array(times, TS),
            "id": np.arange(k * self.changed, (k + 1) * self.changed, dtype=np.int64),
            "region": self.rng.integers(0, self.regions, self.changed, dtype=np.int64),
            "v": self.rng.integers(0, 1000, self.changed, dtype=np.int64)}), led)
        self.ledger_files.append(led)

    def _change(self) -> None:
        """``changed`` keys: 80 % a new value, 10 % deleted, 10 % added."""
        deleted = added = max(1, self.changed // 10)
        updated = self.changed - deleted - added
        picked = self.rng.choice(len(self.ids), updated + deleted, replace=False)
        self.v = self.v.copy()
        self.v[picked[:updated]] += self.rng.integers(1, 100, updated, dtype=np.int64)
        kept = np.ones(len(self.ids), dtype=bool)
        kept[picked[updated:]] = False
        new = np.arange(self.next_id, self.next_id + added, dtype=np.int64)
        self.next_id += added
        self.ids = np.concatenate([self.ids[kept], new])
        self.region = np.concatenate([self.region[kept],
                                      self.rng.integers(0, self.regions, added, dtype=np.int64)])
        self.v = np.concatenate([self.v[kept], self.rng.integers(0, 1000, added, dtype=np.int64)])


@dataclass
class Took:
    wall: float
    cpu: float
    rss_mb: float  # the process's peak resident memory
    out: str
    code: int = 0


class Coord:
    """`coord` as the user runs it, in the workspace ``home``, one process per command
    (``command``: another program, run and measured the same way)."""

    def __init__(self, home: Path, command: list[str] | None = None) -> None:
        self.home, self.command = home, command or coord_command()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONDONTWRITEBYTECODE", "COORD_WORKSPACE")
                    and not k.startswith("COORD_ENGINE")}
        self.env["PYTHONPATH"] = str(ROOT)

    def __call__(self, *args: str, ok: bool | None = True) -> Took:
        """Run ``coord *args``; ``ok``: whether it must succeed (None: either)."""
        # the peak RSS comes from /usr/bin/time: a child's ru_maxrss from wait4 also counts
        # the memory of the copy of this process it was forked from, before its exec
        timer = [TIME, "-f", "%M", "-o"] if Path(TIME).exists() else None
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                tempfile.NamedTemporaryFile("r") as peak:
            began = time.perf_counter()
            proc = subprocess.Popen([*(timer + [peak.name] if timer else []), *self.command, *args],
                                    cwd=self.home, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - began
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(), err.read().decode()
            said = peak.read().split()
            rss_mb = int(said[-1]) / 1024 if timer and said and said[-1].isdigit() else float("nan")
        if ok is not None and (proc.returncode == 0) != ok:
            raise SystemExit(f"{Path(self.command[0]).name} {' '.join(args)} ended {proc.returncode}:\n"
                             f"{stdout[-1500:]}{stderr[-3000:]}")
        return Took(wall, usage.ru_utime + usage.ru_stime, rss_mb, stdout + stderr, proc.returncode)

    def sql(self, query: str) -> list[dict]:
        return json.loads(self("sql", "-o", "json", "-c", query).out.strip() or "[]")


def engine_memory_mb(home: Path) -> tuple[float, float] | None:
    """Resident and peak resident memory (VmRSS, VmHWM) of this workspace's sandboxed engine:
    the process whose command line names the engine's server and a folder of ``home``, and
    every process under it (the JVM), summed; None if there is none (a container engine)."""
    def status(pid: str) -> dict[str, int]:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in lines)
                if k in ("VmRSS", "VmHWM")}

    roots = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"odf_spark_engine" in cmd and str(home).encode() in cmd:
            roots.append(pid)
    seen: set[str] = set()
    while roots:
        pid = roots.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                roots.extend(task.read_text().split())
            except OSError:
                continue
    rss = hwm = 0
    for pid in seen:
        try:
            got = status(pid)
        except OSError:
            continue
        rss, hwm = rss + got.get("VmRSS", 0), hwm + got.get("VmHWM", 0)
    return (rss / 1024, hwm / 1024) if seen else None


def write_manifests(home: Path, ledger_query: str, name: str = LEDGER_DAILY) -> None:
    """Every manifest, the baseline's aggregate ``ledger_query`` as ``name``."""
    import yaml

    for dataset, source in {**MANIFESTS, name: {
            "kind": "derivative", "inputs": [LEDGER],
            "transform": {"kind": "sql", "engine": "spark", "query": ledger_query}}}.items():
        (home / f"{dataset}.yaml").write_text(yaml.safe_dump(
            {"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": dataset, "source": source}},
            sort_keys=False))


# ----- DuckDB from scratch -----------------------------------------------------------------------


def duckdb_aggregate(snapshot: Path) -> tuple[float, dict[int, tuple[int, int]]]:
    import duckdb

    con = duckdb.connect()
    began = time.perf_counter()
    con.execute(f"CREATE TABLE a AS SELECT region, count(*) AS n, sum(v) AS v "
                f"FROM read_parquet('{snapshot}') GROUP BY region")
    seconds = time.perf_counter() - began
    return seconds, {r: (n, int(v)) for r, n, v in con.sql("SELECT * FROM a").fetchall()}


def duckdb_join(snapshots: list[Path], events: list[Path]) -> tuple[float, tuple]:
    """The events joined with the snapshot in force at each one's time (the latest snapshot
    dated at or before it), then on the key: what the temporal join computes."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    dates = pa.table({"file": [str(p) for p in snapshots],
                      "t": pa.array([us(day(k)) for k in range(len(snapshots))], TS)})
    con.register("dates", dates)
    began = time.perf_counter()
    con.execute(f"""
        CREATE TABLE j AS
        WITH s AS (SELECT s.id, s.region, s.v, d.t FROM read_parquet({[str(p) for p in snapshots]},
                                                                     filename = true) s
                   JOIN dates d ON s.filename = d.file),
             e AS (SELECT * FROM read_parquet({[str(p) for p in events]}))
        SELECT e.event_time, e.eid, e.id, s.region, s.v
        FROM e ASOF JOIN dates d ON e.event_time >= d.t
        JOIN s ON s.t = d.t AND s.id = e.id""")
    seconds = time.perf_counter() - began
    [answer] = con.sql("SELECT count(*), sum(eid), sum(region), sum(v) FROM j").fetchall()
    return seconds, tuple(int(x or 0) for x in answer)


def duckdb_ledger_daily(files: list[Path], watermark: datetime) -> dict[tuple, tuple[int, int]]:
    """The 1-day windows the ledger's watermark closed, per region."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rows = con.sql(f"""
        SELECT time_bucket(INTERVAL 1 day, event_time) + INTERVAL 1 day AS t, region, count(*), sum(v)
        FROM read_parquet({[str(p) for p in files]}) GROUP BY ALL
        HAVING t <= TIMESTAMPTZ '{watermark.isoformat()}'""").fetchall()
    return {(t.astimezone(UTC).isoformat(), r): (n, int(v)) for t, r, n, v in rows}


def pull(coord: Coord, name: str, step: int, failures: list[str]) -> Took:
    """`coord pull name`; a pull that fails is said (the command, its time, its message) and
    run once more, as its message tells a user to ("append again"): the step's figure is
    then the second run's. A second failure ends the benchmark."""
    took = coord("pull", name, ok=None)
    if took.code == 0:
        return took
    said = [line for line in took.out.splitlines() if line.strip()]
    failures.append(f"FAILED at step {step} after {took.wall:.1f} s: `coord pull {name}` ended "
                    f"{took.code}: {said[-1] if said else '(nothing said)'}")
    print(failures[-1], flush=True)
    return coord("pull", name)


# ----- checks ------------------------------------------------------------------------------------


def check(coord: Coord, data: Data) -> list[str]:
    """The derivatives' rows at the last step against DuckDB's; returns what differs."""
    problems = []
    _, answer = duckdb_aggregate(data.snapshot_files[-1])
    expected = {region: (n, v, 1) for region, (n, v) in answer.items()}  # each row held once
    got = {r["region"]: (r["n"], int(r["v"]), r["c"]) for r in coord.sql(
        f'SELECT region, n, v, sum({SIGN}) AS c FROM "{BY_REGION}" GROUP BY ALL HAVING c <> 0')}
    if got != expected:
        diff = {k for k in expected.keys() | got.keys() if got.get(k) != expected.get(k)}
        problems.append(f"{BY_REGION}: {len(diff)} regions differ from DuckDB's, e.g. "
                        f"{[(k, got.get(k), expected.get(k)) for k in sorted(diff)[:3]]}")
    _, expected_join = duckdb_join(data.snapshot_files, data.event_files)
    [row] = coord.sql(f'SELECT sum({SIGN}) AS n, sum({SIGN} * eid) AS se, sum({SIGN} * region) AS sr, '
                      f'sum({SIGN} * v) AS sv FROM "{ENRICHED}"')
    got_join = tuple(int(row[k] or 0) for k in ("n", "se", "sr", "sv"))
    if got_join != expected_join:
        problems.append(f"{ENRICHED}: (rows, sum eid, sum region, sum v) {got_join}, "
                        f"DuckDB {expected_join}")
    [wm] = coord.sql(f'SELECT max(event_time) AS t FROM "{LEDGER}"')
    watermark = datetime.fromisoformat(wm["t"].replace("Z", "+00:00"))
    expected_daily = duckdb_ledger_daily(data.ledger_files, watermark)
    got_daily = {(datetime.fromisoformat(r["event_time"].replace("Z", "+00:00")).isoformat(),
                  r["region"]): (r["n"], int(r["v"])) for r in coord.sql(
        f'SELECT event_time, region, n, v FROM "{LEDGER_DAILY}"')}
    if got_daily != expected_daily or not expected_daily:
        problems.append(f"{LEDGER_DAILY}: {len(got_daily)} windows, DuckDB {len(expected_daily)} "
                        f"(or values differ)")
    return problems


# ----- the run -----------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the first snapshot")
    ap.add_argument("--steps", type=int, default=10, help="changed snapshots after the first")
    ap.add_argument("--changed-pct", type=float, default=1.0, help="keys changed per step, %%")
    ap.add_argument("--events", type=int, help="events per step (default: as many as keys change)")
    ap.add_argument("--regions", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="100,000 rows, 3 steps")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.steps = 100_000, 3
    changed = max(10, int(args.rows * args.changed_pct / 100))
    events = args.events or changed
    compileall.compile_dir(ROOT / "coordinator", quiet=1)  # as pip does when it installs
    load = [Path("/proc/loadavg").read_text().split()[0]]

    with tempfile.TemporaryDirectory(prefix="bench-corrections-") as tmp:
        home = Path(tmp)
        coord = Coord(home)
        coord("init")
        coord("config", "set", "engine.keepWarm", "30m")
        try:
            data = Data(home, args.rows, changed, events, args.regions)
            data.write_step(0)

            write_manifests(home, WINDOWED_LEDGER_AGG)
            coord("add", *(f"{n}.yaml" for n in (SNAP, BY_REGION, EVENTS, ENRICHED, LEDGER, LEDGER_DAILY)))

            order = [("snap", SNAP), ("agg", BY_REGION), ("events", EVENTS), ("join", ENRICHED),
                     ("ledger", LEDGER), ("ledger agg", LEDGER_DAILY)]
            steps: list[dict] = []
            failures: list[str] = []
            for k in range(args.steps + 1):
                if k:
                    data.write_step(k)
                took = {short: pull(coord, name, k, failures) for short, name in order}
                if k == 0:
                    engines = coord("system", "engines").out.strip()
                    print("the warm engine:", engines.replace("\n", "; "))
                agg_s, _ = duckdb_aggregate(data.snapshot_files[-1])
                join_s, _ = duckdb_join(data.snapshot_files, data.event_files)
                load.append(Path("/proc/loadavg").read_text().split()[0])
                steps.append({"k": k, "took": took, "engine": engine_memory_mb(home),
                              "duck_agg": agg_s, "duck_join": join_s,
                              "pending": [line for t in took.values() for line in t.out.splitlines()
                                          if "wait for" in line]})
                print(f"step {k}: " + ", ".join(f"{s} {t.wall:.1f}s" for s, t in took.items()), flush=True)

            problems = check(coord, data)
            history = coord.sql(f'SELECT count(*) AS n FROM "{SNAP}"')[0]["n"]
            # why the baseline has a window: the same aggregate without one, over the same ledger
            write_manifests(home, PLAIN_LEDGER_AGG, name=f"{LEDGER_DAILY}-plain")
            coord("add", f"{LEDGER_DAILY}-plain.yaml")
            plain = coord("pull", f"{LEDGER_DAILY}-plain", ok=None)
        finally:  # the warm engine, whatever happened
            coord("system", "engines", "--stop", ok=None)

    report(args, changed, events, steps, history, load)
    for failure in failures:
        print(failure)
    said = plain.out.strip().splitlines()[-1] if plain.out.strip() else "(nothing said)"
    print(f"the baseline's aggregate without a window: `coord pull {LEDGER_DAILY}-plain` "
          f"ended {plain.code}: {said}")
    if problems:
        raise SystemExit("WRONG ANSWER:\n" + "\n".join(problems))
    print("checked: the derivatives' rows at the last step equal DuckDB's answers")


def report(args: argparse.Namespace, changed: int, events: int, steps: list[dict], history: int,
           load: list[str]) -> None:
    times, memory = [], []
    for s in steps:
        t = s["took"]
        times.append({"step": s["k"], **{f"{k} s": t[k].wall for k in t},
                      "DuckDB agg s": s["duck_agg"], "DuckDB join s": s["duck_join"]})
        engine = s["engine"] or (None, None)
        memory.append({"step": s["k"], **{f"{k} MB": t[k].rss_mb for k in t},
                       "engine RSS MB": engine[0], "engine peak MB": engine[1]})
    print_table(times, title=f"wall seconds of each `coord pull` (a whole process) per step: "
                             f"{args.rows:,} rows, {changed:,} keys changed a step, {events:,} events "
                             f"and {changed:,} ledger rows a step; step 0: the first load and the "
                             f"engine's start")
    print_table(memory, title="peak RSS of each `coord pull` process (/usr/bin/time), and the warm "
                              "engine's resident memory after the step (/proc, its process tree)")

    later = steps[1:]
    med = statistics.median

    def m(*keys: str, cpu: bool = False) -> float:
        return med(sum((s["took"][k].cpu if cpu else s["took"][k].wall) for k in keys) for s in later)

    append, append_agg = m("ledger", "ledger agg"), m("ledger agg")
    agg_duck, join_duck = med(s["duck_agg"] for s in later), med(s["duck_join"] for s in later)
    first = steps[0]["took"]
    what, vs = f"median of steps 1..{len(later)}", "vs append-only"

    def row(name: str, keys: tuple[str, ...], over: float | None, duck: float | None) -> dict:
        wall = m(*keys)
        return {what: name, "wall s": wall, "coord CPU s": m(*keys, cpu=True),
                vs: wall / over if over else None, "vs DuckDB": wall / duck if duck else None,
                "step 0 s": sum(first[k].wall for k in keys)}

    print_table([
        row("snapshot pull + aggregate pull", ("snap", "agg"), append, agg_duck),
        row("  the aggregate pull", ("agg",), append_agg, agg_duck),
        row("events pull + temporal join pull", ("events", "join"), append, join_duck),
        row("  the join pull", ("join",), append_agg, join_duck),
        row("append-only: ledger pull + 1-day window pull", ("ledger", "ledger agg"), append, None),
        row("  the window pull", ("ledger agg",), append_agg, None),
        {what: "DuckDB from scratch: the aggregate over the snapshot", "wall s": agg_duck},
        {what: "DuckDB from scratch: the join over all events, snapshots", "wall s": join_duck},
    ], title=f"per step (target: at most 3x the append-only step); {history:,} change records "
             f"in {SNAP} at the end")
    pending = [line for s in steps for line in s["pending"]]
    if pending:
        print("rows waiting:", *pending[-3:], sep="\n  ")
    print(f"load average (1 min) at the start and after each step: {' '.join(load)}")


if __name__ == "__main__":
    main()
