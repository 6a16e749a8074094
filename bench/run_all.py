"""Runs every bench/bench_*.py in turn, each in its own process, and prints their tables.

    python bench/run_all.py [--quick] [--only NAME ...]

``--quick`` is passed on to the benchmarks that accept it (those whose source mentions
``--quick``); the others run with their defaults. Exits non-zero if any benchmark failed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmarks(only: list[str]) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    if only:
        scripts = [s for s in scripts if s.stem in only or s.stem.removeprefix("bench_") in only]
    return scripts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs, where a benchmark supports it")
    ap.add_argument("--only", nargs="+", default=[], metavar="NAME", help="e.g. pipeline engine")
    args = ap.parse_args()

    scripts = benchmarks(args.only)
    if not scripts:
        print("no benchmark matched", file=sys.stderr)
        return 2
    # the benchmarks measure this checkout, even if the editable install points elsewhere
    path = os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    results = []
    for script in scripts:
        command = [sys.executable, str(script)]
        if args.quick and "--quick" in script.read_text():
            command.append("--quick")
        print(f"\n=== {script.name} {' '.join(command[2:])}".rstrip(), flush=True)
        began = time.perf_counter()
        # output goes straight through: the tables are the point, and progress shows as it comes
        code = subprocess.run(command, cwd=HERE.parent, env=env, stdin=subprocess.DEVNULL).returncode
        results.append((script.name, code, time.perf_counter() - began))

    print("\n=== summary")
    for name, code, seconds in results:
        print(f"{name:<24} {'ok' if code == 0 else f'FAILED (exit {code})':<16} {seconds:7.1f} s")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
