"""Push ingest into a current-ODF (0.39) root against a pull of the same file, whole processes.

    python bench/bench_push_ingest.py [--rows N] [--repeat N] [--quick]

One CSV file of ``--rows`` records (default 1,000,000: id, event time, name, value), and per
repetition, cases alternated so that load on the machine hits all alike, each into a fresh
0.39 workspace (init and add not timed):

- ``coord pull``: a root whose ``SetPollingSource`` globs the file (the baseline);
- ``coord ingest DS FILE``: a root whose ``AddPushSource`` has the same read step and merge;
- HTTP: ``POST /api/datasets/DS/ingest`` (``Content-Type: text/csv``) to a ``coord serve
  --allow-writes`` started beforehand on that workspace (its start not timed): the request's
  wall time, and as CPU the server process's own (``/proc/PID/stat``) over the request.

Medians of wall and CPU time (user + system, from ``wait4`` for the commands), and each as
a ratio to ``coord pull``. The records each case committed are counted from its chain.
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

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).parent))
from bench_odf_ingest import run
from common import print_table

ROOT = Path(__file__).resolve().parents[1]
COORD = [sys.executable, "-m", "coordinator.cli"]
# every process measures this checkout (``run`` starts them with this process's environment)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
ENV = dict(os.environ)
READ = """      read:
        kind: Csv
        header: true
        ddlSchema: ["id BIGINT", "at TIMESTAMP", "name STRING", "v DOUBLE"]
      merge: {kind: Append}
    - kind: SetVocab
      eventTimeColumn: at
"""
POLLED = """kind: DatasetSnapshot
version: 1
content:
  name: bench
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: "in/*.csv"}
""" + READ
PUSHED = """kind: DatasetSnapshot
version: 1
content:
  name: bench
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
""" + READ


def data_file(rows: int, tmp: Path) -> Path:
    """``rows`` records written by pyarrow (vectorised): ids, one event time a second, a
    name out of 1,000, a value."""
    ids = np.arange(rows, dtype=np.int64)
    at = pa.array(ids + 1_600_000_000, pa.int64()).cast(pa.timestamp("s"))
    names = pa.array(np.char.add("name-", (ids % 1000).astype(str)))
    table = pa.table({"id": ids, "at": at, "name": names, "v": ids * 0.5})
    out = tmp / "in.csv"
    pacsv.write_csv(table, out)
    return out


def workspace(tmp: Path, name: str, manifest: str, csv: Path) -> Path:
    home = tmp / name
    shutil.rmtree(home, ignore_errors=True)
    (home / "in").mkdir(parents=True)
    os.link(csv, home / "in" / csv.name)
    subprocess.run([*COORD, "init", "--odf", "0.39", str(home)], env=ENV, check=True, capture_output=True)
    (home / "bench.yaml").write_text(manifest)
    subprocess.run([*COORD, "add", "bench.yaml"], cwd=home, env=ENV, check=True, capture_output=True)
    return home


def records(home: Path) -> int:
    from coordinator.store.dataset import CurrentDataset
    from coordinator.workspace import Workspace

    slices = CurrentDataset(Workspace.open(home), "bench").state().slices
    return sum(s.slice.offset_interval.end - s.slice.offset_interval.start + 1 for s in slices)


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def posted(tmp: Path, csv: Path) -> tuple[tuple[float, float], Path]:
    """(wall, server CPU) of one POST to a fresh served workspace, and the workspace."""
    home = workspace(tmp, "served", PUSHED, csv)
    proc = subprocess.Popen([*COORD, "serve", "--port", "0", "--allow-writes"], cwd=home, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split()[2].rstrip("/")
        body = csv.read_bytes()
        cpu = cpu_of(proc.pid)
        began = time.perf_counter()
        r = httpx.post(f"{url}/api/datasets/bench/ingest", content=body,
                       headers={"Content-Type": "text/csv"}, timeout=3600)
        wall = time.perf_counter() - began
        r.raise_for_status()
        return (wall, cpu_of(proc.pid) - cpu), home
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def bench(csv: Path, tmp: Path, repeat: int) -> list[dict]:
    cases: dict[str, list[tuple[float, float]]] = {}
    held: dict[str, int] = {}
    for _ in range(repeat):
        home = workspace(tmp, "polled", POLLED, csv)
        cases.setdefault("coord pull (polling source)", []).append(run([*COORD, "pull", "bench"], home))
        held["coord pull (polling source)"] = records(home)
        home = workspace(tmp, "pushed", PUSHED, csv)
        cases.setdefault("coord ingest FILE", []).append(
            run([*COORD, "ingest", "bench", str(home / "in" / csv.name)], home))
        held["coord ingest FILE"] = records(home)
        timing, home = posted(tmp, csv)
        cases.setdefault("POST /ingest to coord serve", []).append(timing)
        held["POST /ingest to coord serve"] = records(home)
    wall = {k: statistics.median(w for w, _ in v) for k, v in cases.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in cases.items()}
    base = "coord pull (polling source)"
    return [{"case": k, "records": held[k], "wall s": wall[k], "CPU s": cpu[k],
             "vs pull (wall)": wall[k] / wall[base], "vs pull (CPU)": cpu[k] / cpu[base]}
            for k in cases]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 rows, one repetition")
    args = parser.parse_args()
    rows, repeat = (100_000, 1) if args.quick else (args.rows, args.repeat)
    with tempfile.TemporaryDirectory(prefix="bench-push-ingest-") as tmp_name:
        tmp = Path(tmp_name)
        csv = data_file(rows, tmp)
        print(f"{rows:,} rows, {csv.stat().st_size / 1e6:,.0f} MB of CSV; "
              f"load average before: {os.getloadavg()[0]:.1f}")
        print_table(bench(csv, tmp, repeat), "push ingest vs pull of the same file, whole processes")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
