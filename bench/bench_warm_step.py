"""A derivative step's fixed cost on a warm engine: a whole `coord pull` of a tiny input.

    python bench/bench_warm_step.py [--repeat N] [--before DIR]

A current-ODF workspace (what `coord init` makes) holds a root `r` (CSV files, 1,000 rows to
begin with) and two derivatives of it: `filter` (a stateless WHERE: no streaming state) and
`window` (a one-hour tumbling window per key: streaming state). Its engine is the workspace's
warm engine (keep-warm on, sandbox runtime, so the engine's code is the checkout's own),
started by an untimed first pull. Each round adds one CSV file of 10 rows, pulls `r`
(untimed), then times `coord pull filter` and `coord pull window`, each a whole process as a
user runs it. The engine's log gives what the engine itself spent on the step (``execute``)
and on the step's field lineage (``lineage``); the rest of the process (start-up, imports,
attaching to the engine, planning, writing and committing the block) is the coordinator's.
Target: a step under 1 s.

``--before DIR``: another checkout of coord (``git worktree add /tmp/before <commit>``) run
beside this one, each with a workspace and a warm engine of its own, the rounds alternating
between them (column ``code``): a before and after in one run on this shared machine. Medians
of --repeat rounds (at least 5).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from common import print_table

ROOT = Path(__file__).resolve().parents[1]
DERIVATIVES = {
    "filter": "SELECT t AS event_time, k, v FROM r WHERE v % 2 = 0",
    "window": "SELECT window.end AS event_time, k, count(*) AS n, sum(v) AS s FROM r "
              "GROUP BY window(t, '1 hour'), k",
}
KEYS = 7
LOGGED = re.compile(r"(execute|lineage) tx=\S+ dataset=(\S+): done in ([0-9.]+) s")
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def write_rows(folder: Path, index: int, rows: int) -> None:
    """The ``index``-th CSV file: ``rows`` readings 10 s apart, three hours after the last file's."""
    start = T0 + timedelta(hours=3 * index)
    lines = [f"{(start + timedelta(seconds=10 * i)).isoformat().replace('+00:00', 'Z')},k{i % KEYS},{i}"
             for i in range(rows)]
    (folder / f"{index:06d}.csv").write_text("t,k,v\n" + "\n".join(lines) + "\n")


def manifest(name: str, source: dict, vocab: dict | None = None) -> dict:
    content = {"id": name, "source": source, **({"vocab": vocab} if vocab else {})}
    return {"apiVersion": 1, "kind": "DatasetSnapshot", "content": content}


class Pipeline:
    """One code's workspace, its commands run with that code (``PYTHONPATH``)."""

    def __init__(self, home: Path, code: Path):
        self.home, self.files = home, 0
        self.env = {**os.environ, "PYTHONPATH": str(code), "COORD_ENGINE_RUNTIME": "sandbox",
                    "COORD_ENGINE_KEEP_WARM": "900"}
        self.env.pop("COORD_WORKSPACE", None)
        (home / "data").mkdir(parents=True)
        write_rows(home / "data", 0, 1000)
        docs = [manifest("r", {"kind": "root", "fetch": {"kind": "filesGlob", "path": "data/*.csv"},
                               "read": {"kind": "csv", "header": True,
                                        "schema": ["t TIMESTAMP", "k STRING", "v BIGINT"]},
                               "merge": {"kind": "append"}}, {"eventTimeColumn": "t"})]
        docs += [manifest(name, {"kind": "derivative", "inputs": ["r"],
                                 "transform": {"kind": "sql", "engine": "spark", "query": query}})
                 for name, query in DERIVATIVES.items()]
        (home / "manifests").mkdir()
        for doc in docs:
            (home / "manifests" / f"{doc['content']['id']}.yaml").write_text(yaml.safe_dump(doc))
        self.coord("init")
        self.coord("add", "manifests")
        self.coord("pull", "r", *DERIVATIVES)  # starts the warm engine (untimed)

    def coord(self, *args: str) -> float:
        began = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "coordinator.cli", *args], cwd=self.home,
                              env=self.env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        took = time.perf_counter() - began
        if proc.returncode != 0:
            raise RuntimeError(f"coord {' '.join(args)} ended {proc.returncode}:\n{proc.stderr[-2000:]}")
        return took

    def new_delivery(self) -> None:
        self.files += 1
        write_rows(self.home / "data", self.files, 10)
        self.coord("pull", "r")

    def engine_seconds(self, dataset: str) -> dict[str, float]:
        """What the engine's log says its last requests for ``dataset`` took."""
        log = (self.home / ".coord" / "run" / "warm" / "engine.log").read_text(errors="replace")
        found: dict[str, float] = {}
        for operation, name, seconds in LOGGED.findall(log):
            if name == dataset:
                found[operation] = float(seconds)
        return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before", type=Path, metavar="DIR", help="another checkout of coord")
    args = ap.parse_args()
    codes = {"this": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-warm-step-") as tmp:
        spaces = {code: Pipeline(Path(tmp) / code, path) for code, path in codes.items()}
        try:
            for _ in range(args.repeat):
                for code, ws in spaces.items():
                    ws.new_delivery()
                    for name in DERIVATIVES:
                        wall = ws.coord("pull", name)
                        runs.setdefault((code, name), []).append({"wall": wall, **ws.engine_seconds(name)})
        finally:
            for ws in spaces.values():
                ws.coord("system", "engines", "--stop")
    med = statistics.median
    rows = []
    for (code, name), took in runs.items():
        wall, execute, lineage = (med(t.get(k, 0.0) for t in took) for k in ("wall", "execute", "lineage"))
        rows.append({**({"code": code} if args.before else {}), "step (10 new rows)": f"coord pull {name}",
                     "whole process s": wall, "engine execute s": execute, "engine lineage s": lineage,
                     "coordinator s": wall - execute - lineage, "runs": len(took),
                     "target s": 1.0, "met": "yes" if wall < 1.0 else "no"})
    print_table(rows, title="A warm engine's derivative step on a tiny input (sandbox, medians)")


if __name__ == "__main__":
    main()
