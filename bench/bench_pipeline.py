"""A chain of five derivative datasets through the real ``coord`` command and sandboxed engine.

    python bench/bench_pipeline.py [--quick] [--rows N] [--repeat N] [--starts N] [--no-container]

The root `bench.orders` takes ROWS deterministic orders from 4 CSV files; five derivatives
each read the one before: a filter, a projection, another filter, a one-hour tumbling-window
aggregation per customer, a projection. Every pull runs in a fresh workspace whose root has
been ingested first (untimed, shown for scale), with ``COORD_ENGINE_RUNTIME=sandbox``:

(a) chain       one ``coord pull -r bench.d5`` — one command, so one engine for five datasets;
(b) separate    ``coord pull bench.d1`` … ``coord pull bench.d5``, five commands, five engines;
(c) single      ``coord pull bench.d1`` alone: the first command of (b), same state, same work.

After (a), ``coord verify --invariance bench.d4`` (the window) is timed too: one engine, one
Execute over every slice of its input, the records compared with the committed ones.

Engine starts are counted, not assumed: while a command runs a thread polls the workspace's
``.coord/run`` every 20 ms for the ``engine-<8 hex>`` run folders that ``open_engine`` creates
for each engine process (and removes when it stops; an engine lives at least several seconds,
so none is missed). It also notes when each folder's ``engine.sock`` appears: the server
listens only once Spark is up, so that is the time from ``coord pull`` to a ready engine.

Then the time from start to first answered request per runtime, measured directly as in
bench_engine.py: ``start_engine`` (returns once the engine answered Identify) plus one Identify
on a new connection; the container runtime needs Podman's API service and the engine image
(``engines/spark/podman-setup.sh``, ``build-image.sh``); if those fail it is reported, not
measured. Medians over --repeat / --starts runs; the machine is shared and noisy.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

# this checkout's code, wherever the editable install points
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))
from common import print_table

from coordinator.engine.client import EngineClient
from coordinator.engine.runtime import start_engine
from coordinator.engine.settings import EngineSettings

REPO = Path(__file__).resolve().parents[1]
SPARK_DIR = REPO / "engines" / "spark"
ROOT = "bench.orders"
CHAIN = {
    "bench.d1": f"SELECT event_time, order_id, customer, amount FROM `{ROOT}` WHERE amount > 0",
    "bench.d2": "SELECT event_time, customer, amount FROM `bench.d1`",
    "bench.d3": "SELECT event_time, customer, amount FROM `bench.d2` WHERE amount >= 20",
    "bench.d4": "SELECT window.end AS event_time, customer, count(*) AS orders, sum(amount) AS total "
                "FROM `bench.d3` GROUP BY window(event_time, '1 hour'), customer",
    "bench.d5": "SELECT event_time, customer, total FROM `bench.d4`",
}
LAST = list(CHAIN)[-1]
WINDOW = "bench.d4"
FILES = 4
CUSTOMERS = 50
T0 = datetime(2024, 1, 1, tzinfo=UTC)
SANDBOX = {"COORD_ENGINE_RUNTIME": "sandbox", "COORD_ENGINE_KEEP_WARM": "0"}  # an engine per command
ENGINE_DIR = re.compile(r"engine-[0-9a-f]{8}$")


# ----- the pipeline --------------------------------------------------------------------------


def write_orders(folder: Path, rows: int) -> None:
    """ROWS orders, one every 2 s, in FILES CSV files; about 5% have amount <= 0."""
    folder.mkdir(parents=True)
    per_file = -(-rows // FILES)
    for f in range(FILES):
        lines = ["event_time,order_id,customer,amount"]
        for i in range(f * per_file, min(rows, (f + 1) * per_file)):
            t = (T0 + timedelta(seconds=2 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            lines.append(f"{t},{i},c{(i * 31) % CUSTOMERS:02d},{((i * 7919) % 10007 - 500) / 100:.2f}")
        (folder / f"orders-{f}.csv").write_text("\n".join(lines) + "\n")


def write_manifests(folder: Path) -> None:
    folder.mkdir()
    docs = {ROOT: {
        "kind": "root",
        "fetch": {"kind": "filesGlob", "path": "orders/*.csv", "order": "byName"},
        "read": {"kind": "csv", "header": True,
                 "schema": ["event_time TIMESTAMP", "order_id BIGINT", "customer STRING", "amount DOUBLE"]},
        "merge": {"kind": "ledger", "primaryKey": ["order_id"]},
    }}
    previous = ROOT
    for dataset_id, query in CHAIN.items():
        docs[dataset_id] = {"kind": "derivative", "inputs": [previous],
                            "transform": {"kind": "sql", "engine": "spark", "query": query}}
        previous = dataset_id
    for dataset_id, source in docs.items():
        doc = {"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": dataset_id, "source": source}}
        (folder / f"{dataset_id}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def coord(*args: str, cwd: Path) -> str:
    env = {**os.environ, **SANDBOX}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("COORD_WORKSPACE", None)
    proc = subprocess.run([sys.executable, "-m", "coordinator.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"coord {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def ingested_workspace(scratch: Path, name: str, orders: Path) -> tuple[Path, float]:
    """A fresh workspace with the pipeline added and the root pulled; the pull's seconds."""
    home = scratch / name
    home.mkdir()
    coord("init", "--odf", "0.18", cwd=home)
    shutil.copytree(orders, home / "orders")
    write_manifests(home / "manifests")
    coord("add", str(home / "manifests"), cwd=home)
    began = time.perf_counter()
    coord("pull", ROOT, cwd=home)
    return home, time.perf_counter() - began


class EngineWatch:
    """Counts the engine run folders that appear under ``.coord/run`` while a command runs,
    and when each one's socket appears (seconds after ``began``)."""

    def __init__(self, home: Path):
        self.run = home / ".coord" / "run"
        self.seen: dict[str, float | None] = {}  # run folder → socket seen after (s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> EngineWatch:
        self.began = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.02):
            try:
                names = [e.name for e in os.scandir(self.run) if ENGINE_DIR.match(e.name)]
            except FileNotFoundError:
                continue
            for name in names:
                if self.seen.get(name) is None:
                    ready = (self.run / name / "engine.sock").exists()
                    self.seen[name] = time.perf_counter() - self.began if ready else None

    @property
    def starts(self) -> int:
        return len(self.seen)

    @property
    def ready_after(self) -> list[float]:
        return [t for t in self.seen.values() if t is not None]


def timed_pull(home: Path, *args: str) -> tuple[float, EngineWatch, str]:
    with EngineWatch(home) as watch:
        began = time.perf_counter()
        out = coord("pull", *args, cwd=home)
        elapsed = time.perf_counter() - began
    return elapsed, watch, out


def records(out: str, dataset_id: str) -> int:
    m = re.search(rf"^{re.escape(dataset_id)}: ([\d,]+) new records", out, re.M)
    return int(m.group(1).replace(",", "")) if m else 0


# ----- start → first answer ------------------------------------------------------------------


def first_answer_seconds(settings: EngineSettings, scratch: Path, starts: int) -> list[float]:
    data = scratch / "data"
    data.mkdir(exist_ok=True)
    times = []
    for i in range(starts):
        began = time.perf_counter()
        engine = start_engine(settings, scratch / f"{settings.runtime}-{i}", [data])
        try:
            with EngineClient(engine.socket_path) as client:
                client.identify()
            times.append(time.perf_counter() - began)
        finally:
            engine.stop()
    return times


def container_ready() -> str | None:
    """Sets COORD_CONTAINER_HOST once Podman's API and the image are there; else the reason."""
    for script in ("podman-setup.sh", "build-image.sh"):
        try:
            proc = subprocess.run(["bash", str(SPARK_DIR / script)], capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=1800)
        except subprocess.TimeoutExpired:
            return f"{script} timed out"
        if proc.returncode != 0:
            return f"{script} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
        if script == "podman-setup.sh":
            os.environ["COORD_CONTAINER_HOST"] = f"unix://{proc.stdout.strip().splitlines()[-1]}"
    return None


# ----- main ----------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 rows, one run, one start per runtime")
    ap.add_argument("--rows", type=int, help="orders in the root (default 200,000)")
    ap.add_argument("--repeat", type=int, help="runs of (a) and (b)/(c) (default 2)")
    ap.add_argument("--starts", type=int, help="engine starts per runtime (default 3)")
    ap.add_argument("--no-container", action="store_true", help="measure the sandbox runtime only")
    args = ap.parse_args()
    rows = args.rows or (20_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 2)
    starts = args.starts or (1 if args.quick else 3)

    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        scratch = Path(tmp)
        write_orders(scratch / "orders", rows)
        ingest, chain, separate, single, invariance = [], [], [], [], []
        chain_starts, separate_starts, ready_in_command = set(), set(), []
        chain_out = ""
        for r in range(repeat):
            home, seconds = ingested_workspace(scratch, f"chain{r}", scratch / "orders")
            ingest.append(seconds)
            seconds, watch, chain_out = timed_pull(home, "-r", LAST)
            chain.append(seconds)
            chain_starts.add(watch.starts)
            ready_in_command += watch.ready_after
            began = time.perf_counter()
            checked = coord("verify", "--invariance", WINDOW, cwd=home)
            assert ": invariant: " in checked, checked
            invariance.append(time.perf_counter() - began)

            home, _ = ingested_workspace(scratch, f"separate{r}", scratch / "orders")
            steps, engines = [], 0
            for dataset_id in CHAIN:
                seconds, watch, _ = timed_pull(home, dataset_id)
                steps.append(seconds)
                engines += watch.starts
                ready_in_command += watch.ready_after
            separate.append(sum(steps))
            single.append(steps[0])
            separate_starts.add(engines)

        runtimes = {"sandbox": None}
        if not args.no_container:
            runtimes["container"] = container_ready()
        answers = {}
        for runtime, problem in runtimes.items():
            if problem is None:
                try:
                    answers[runtime] = first_answer_seconds(EngineSettings(runtime=runtime), scratch, starts)
                except Exception as exc:  # report it; the sandbox rows still stand
                    runtimes[runtime] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"

    med = statistics.median
    flow = " → ".join([f"{rows:,}", *(f"{records(chain_out, d):,}" for d in CHAIN)])
    print_table(
        [
            {"measure": f"root ingest ({rows:,} rows, {FILES} CSV files), not in the ratios",
             "runs": repeat, "engines": 0, "median s": med(ingest), "min s": min(ingest)},
            {"measure": f"(a) chain: coord pull -r {LAST} (5 derivatives)", "runs": repeat,
             "engines": _one(chain_starts), "median s": med(chain), "min s": min(chain)},
            {"measure": "(b) separate: coord pull d1 … d5, five commands", "runs": repeat,
             "engines": _one(separate_starts), "median s": med(separate), "min s": min(separate)},
            {"measure": "(c) single: coord pull bench.d1", "runs": repeat, "engines": 1,
             "median s": med(single), "min s": min(single)},
            {"measure": f"coord verify --invariance {WINDOW} (one engine, one Execute)", "runs": repeat,
             "engines": 1, "median s": med(invariance), "min s": min(invariance)},
            {"measure": "coord pull → engine socket ready (sandbox, in the commands)",
             "runs": len(ready_in_command), "engines": "", "median s": med(ready_in_command),
             "min s": min(ready_in_command)},
        ],
        title=f"Derivative chain, sandbox runtime (records per step: {flow})",
    )
    print_table(
        [
            {"ratio": "chain / single (target < 2×)", "value": med(chain) / med(single)},
            {"ratio": "chain / five separate commands", "value": med(chain) / med(separate)},
        ],
        title="Ratios of medians (same run)",
    )
    print_table(
        [
            {"runtime": runtime, "starts": len(answers.get(runtime, [])),
             "median s": med(answers[runtime]) if runtime in answers else None,
             "min s": min(answers[runtime]) if runtime in answers else None,
             "note": problem or ""}
            for runtime, problem in runtimes.items()
        ],
        title="start_engine → first answered request (Identify), per runtime",
    )


def _one(values: set[int]) -> int | str:
    return next(iter(values)) if len(values) == 1 else "/".join(map(str, sorted(values)))


if __name__ == "__main__":
    main()
