"""A warm engine between commands (``engine.keepWarm``): separate `coord` processes that need Spark.

    python bench/bench_warm_engine.py [--quick] [--rows N] [--repeat N]

Each run takes two fresh workspaces holding bench_pipeline's chain, its root ingested
(untimed), sandbox runtime, and times whole `coord` processes:
- cold:   `coord pull bench.d1` with keep-warm off (``COORD_ENGINE_KEEP_WARM=0``): the command
          starts Spark and stops it, as every derivative command did before the warm engine;
- first:  the same pull with keep-warm on (the default, 2 minutes): it starts the warm engine;
- second: `coord pull bench.d2` right after it, on the warm engine;
- typo:   `coord pull` of a derivative just added whose query names a column its input lacks,
          on the warm engine: the time until the command has failed with the engine's message.
The warm engine is stopped (`coord system engines --stop`) at the end of each run. Targets:
second at most a third of cold; the typo reported within 5 s. Medians over --repeat runs; the
machine is shared, so its load stretches every figure alike.
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

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_pipeline import REPO, ingested_workspace, write_orders
from common import print_table

TYPO = {"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": "bench.typo", "source": {
    "kind": "derivative", "inputs": ["bench.d1"],
    "transform": {"kind": "sql", "engine": "spark", "query": "SELECT event_time, amout FROM `bench.d1`"}}}}


def timed(home: Path, *args: str, keep_warm: str, ok: bool = True) -> float:
    env = {**os.environ, "COORD_ENGINE_RUNTIME": "sandbox", "COORD_ENGINE_KEEP_WARM": keep_warm,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("COORD_WORKSPACE", None)
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "coordinator.cli", *args], cwd=home, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    took = time.perf_counter() - began
    if (proc.returncode == 0) != ok:
        raise RuntimeError(f"coord {' '.join(args)} ended {proc.returncode}:\n{proc.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 rows, one run")
    ap.add_argument("--rows", type=int, help="orders in the root (default 20,000)")
    ap.add_argument("--repeat", type=int, help="runs (default 2)")
    args = ap.parse_args()
    rows = args.rows or (2_000 if args.quick else 20_000)
    repeat = args.repeat or (1 if args.quick else 2)

    cold, first, second, typo = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        scratch = Path(tmp)
        write_orders(scratch / "orders", rows)
        for r in range(repeat):
            home, _ = ingested_workspace(scratch, f"cold{r}", scratch / "orders")
            cold.append(timed(home, "pull", "bench.d1", keep_warm="0"))

            home, _ = ingested_workspace(scratch, f"warm{r}", scratch / "orders")
            (home / "typo.yaml").write_text(yaml.safe_dump(TYPO, sort_keys=False))
            try:
                first.append(timed(home, "pull", "bench.d1", keep_warm=""))
                second.append(timed(home, "pull", "bench.d2", keep_warm=""))
                timed(home, "add", "typo.yaml", keep_warm="")
                typo.append(timed(home, "pull", "bench.typo", keep_warm="", ok=False))
            finally:
                timed(home, "system", "engines", "--stop", keep_warm="")

    med = statistics.median
    print_table([
        {"command": "cold: coord pull bench.d1, keep-warm off", "runs": repeat, "median s": med(cold)},
        {"command": "first: coord pull bench.d1, starts the warm engine", "runs": repeat,
         "median s": med(first)},
        {"command": "second: coord pull bench.d2 on the warm engine", "runs": repeat,
         "median s": med(second)},
        {"command": "typo: coord pull of a query naming a missing column, warm", "runs": repeat,
         "median s": med(typo)},
    ], title=f"Derivative commands as separate processes ({rows:,} orders, sandbox)")
    print_table([
        {"ratio": "second / cold (target at most 0.33)", "value": med(second) / med(cold)},
        {"ratio": "typo on a warm engine, seconds (target at most 5)", "value": med(typo)},
    ], title="Ratios of medians (same run)")


if __name__ == "__main__":
    main()
