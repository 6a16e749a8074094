"""``coord serve``: how fast a dropped file propagates, and how the API holds under load.

    python bench/bench_serve.py [--quick] [--repeat N] [--rows N] [--clients N] [--seconds S]

One real ``coord serve`` (sandboxed Spark engine) on a workspace with a 3-dataset chain:
``bench.orders`` (CSV files dropped into ``orders/``) → ``bench.large`` (a filter) →
``bench.large-ids`` (a projection). Roots are polled hourly, so only the folder watcher can
see a file in time.

(a) Propagation. The engine is warmed by a first file. Then, REPEAT times, a file of ROWS rows
    is written under a temporary name and renamed into the folder; the times come from the
    service's commit events (``/api/events``: each says when its pull started and finished):
    detect = drop → root pull starts, ingest = the root's pull, then each derivative's pull,
    total = drop → the last dataset's commit. Medians; target: total < 3 s.
(b) API under load. CLIENTS concurrent clients (asyncio, one keep-alive connection each, a
    minimal HTTP/1.1 client: httpx cost more CPU than the server, so it measured itself) for
    SECONDS against list, tail and lineage, in turn, while a file is dropped every 2 s (so the service
    ingests and derives meanwhile). Per endpoint: requests, p50, p99, errors (non-200 or
    failed). It stops by itself: after SECONDS, or after 200,000 requests.
The machine is shared and noisy; the client runs on the same two cores as the service.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx  # the events stream; the load test has its own small client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))
from common import print_table

from coordinator.metadata.manifest import load_manifest
from coordinator.workspace import Workspace
from coordinator.workspace.catalog import add_datasets

REPO = Path(__file__).resolve().parents[1]
ROOT, LARGE, IDS = "bench.orders", "bench.large", "bench.large-ids"
CHAIN = (ROOT, LARGE, IDS)
MANIFESTS = {
    ROOT: {"kind": "root", "fetch": {"kind": "filesGlob", "path": "orders/*.csv", "order": "byName"},
           "read": {"kind": "csv", "header": True,
                    "schema": ["order_id BIGINT", "customer STRING", "amount DOUBLE"]},
           "merge": {"kind": "append"}},
    LARGE: {"kind": "derivative", "inputs": [ROOT], "transform": {
        "kind": "sql", "engine": "spark",
        "query": f"SELECT event_time, order_id, customer, amount FROM `{ROOT}` WHERE amount >= 10"}},
    IDS: {"kind": "derivative", "inputs": [LARGE], "transform": {
        "kind": "sql", "engine": "spark", "query": f"SELECT event_time, order_id FROM `{LARGE}`"}},
}
MAX_REQUESTS = 200_000


def workspace(home: Path) -> None:
    ws = Workspace.init(home)
    ws.config_path.write_text(ws.config_path.read_text() + "serve: {poll: 1h, engineIdle: 10m}\n")
    (home / "orders").mkdir()
    for dataset_id, source in MANIFESTS.items():
        path = home / f"{dataset_id}.yaml"
        path.write_text(json.dumps({"apiVersion": 1, "kind": "DatasetSnapshot",
                                    "content": {"id": dataset_id, "source": source}}))
        add_datasets(ws, [load_manifest(path)])


def drop(home: Path, n: int, rows: int) -> float:
    """Write orders file ``n`` and rename it into the watched folder; the time of the rename."""
    start = n * rows
    lines = ["order_id,customer,amount"]
    lines += [f"{i},c{i % 97},{(i * 7) % 23}" for i in range(start, start + rows)]
    tmp = home / f".orders-{n:04}.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    dropped = time.time()
    os.rename(tmp, home / "orders" / f"{n:04}.csv")
    return dropped


class Events:
    """The service's commit events, collected by a thread from ``/api/events``."""

    def __init__(self, url: str):
        self.commits: list[dict] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(url,), daemon=True).start()

    def _read(self, url: str) -> None:
        kind = None
        with httpx.stream("GET", url + "/api/events", timeout=None) as r:
            for line in r.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "commit":
                    with self._cond:
                        self.commits.append(json.loads(line[6:]))
                        self._cond.notify_all()

    def wait_commit(self, dataset_id: str, after: float, timeout: float = 600) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c for c in self.commits if c["dataset"] == dataset_id and c["started"] >= after]
                if found:
                    return found[0]
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"no commit of {dataset_id} within {timeout} s")


def propagation(home: Path, events: Events, repeat: int, rows: int) -> list[dict]:
    dropped = drop(home, 0, 100)  # warms the engine
    events.wait_commit(IDS, dropped)
    runs = []
    for n in range(1, repeat + 1):
        dropped = drop(home, n, rows)
        commits = {d: events.wait_commit(d, dropped) for d in CHAIN}
        runs.append({
            "detect": commits[ROOT]["started"] - dropped,
            "ingest": commits[ROOT]["finished"] - commits[ROOT]["started"],
            LARGE: commits[LARGE]["finished"] - commits[LARGE]["started"],
            IDS: commits[IDS]["finished"] - commits[IDS]["started"],
            "total": commits[IDS]["finished"] - dropped,
        })
        print(f"  run {n}: " + ", ".join(f"{k} {v:.2f} s" for k, v in runs[-1].items()), flush=True)
    return runs


async def load(url: str, clients: int, seconds: float) -> dict[str, list]:
    paths = {"list": "/api/datasets", "tail": f"/api/datasets/{ROOT}/tail?n=10",
             "lineage": f"/api/datasets/{IDS}/lineage?direction=up"}
    results: dict[str, list] = {name: [] for name in paths}  # latency in s, or None for an error
    end = time.monotonic() + seconds
    sent = 0
    host, port = url.split("//", 1)[1].rsplit(":", 1)

    async def client(k: int) -> None:
        nonlocal sent
        names = list(paths)
        i = k
        connection = None
        while time.monotonic() < end and sent < MAX_REQUESTS:
            name = names[i % len(names)]
            i += 1
            sent += 1
            began = time.perf_counter()
            try:
                connection = connection or await asyncio.open_connection(host, int(port))
                status = await _get(*connection, host, paths[name])
                results[name].append(time.perf_counter() - began if status == 200 else None)
            except (OSError, ValueError, asyncio.IncompleteReadError):
                results[name].append(None)
                connection = None
        if connection is not None:
            connection[1].close()

    await asyncio.gather(*(client(k) for k in range(clients)))
    return results


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str) -> int:
    """One keep-alive HTTP/1.1 GET; its status. A client this small costs the shared cores
    little, so the latencies are the server's (httpx's own costs dominated them)."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
    await reader.readexactly(int(headers["content-length"]))
    return int(head[0].split()[1])


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 propagations, 10 clients for 10 s")
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--clients", type=int)
    ap.add_argument("--seconds", type=float)
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 10)
    clients = args.clients or (10 if args.quick else 50)
    seconds = args.seconds or (10.0 if args.quick else 30.0)

    home = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COORD_ENGINE_RUNTIME": "sandbox"}
    env.pop("COORD_WORKSPACE", None)
    proc = None
    try:
        workspace(home)
        proc = subprocess.Popen([sys.executable, "-m", "coordinator.cli", "serve", "--port", "0"], cwd=home,
                                env=env, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        url = proc.stdout.readline().split()[2].rstrip("/")
        events = Events(url)
        time.sleep(0.5)  # the event stream is connected

        print(f"(a) propagation of a {args.rows:,}-row file through {' → '.join(CHAIN)}, warm engine, "
              f"median of {repeat}", flush=True)
        runs = propagation(home, events, repeat, args.rows)
        print_table([{"step": k, "median s": statistics.median(r[k] for r in runs),
                      "max s": max(r[k] for r in runs)} for k in runs[0]],
                    title=f"propagation ({args.rows:,} rows; target: total < 3 s)")

        print(f"(b) {clients} clients for {seconds:g} s against list / tail / lineage while ingesting",
              flush=True)
        stop = threading.Event()

        def feed() -> None:
            n = 1000
            while not stop.wait(2.0):
                drop(home, n, 1000)
                n += 1

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        results = asyncio.run(load(url, clients, seconds))
        stop.set()
        feeder.join()
        rows = []
        for name, values in results.items():
            ok = [v for v in values if v is not None]
            rows.append({"endpoint": name, "requests": len(values), "per s": len(values) / seconds,
                         "p50 ms": percentile(ok, 50) * 1000, "p99 ms": percentile(ok, 99) * 1000,
                         "errors": len(values) - len(ok)})
        print_table(rows, title=f"API under load ({clients} clients, {seconds:g} s, while ingesting; "
                                "target: p99 < 100 ms for list and lineage, 0 errors)")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
