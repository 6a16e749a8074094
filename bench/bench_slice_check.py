"""What checking local slices before reading them costs `coord sql` (trust.slice_check).

    python bench/bench_slice_check.py [--mb 300] [--slices 3] [--repeat N] [--quick]
        [--unchecked CHECKOUT] [--home DIR]

A root dataset of about ``--mb`` MB of incompressible Parquet (``--slices`` slices) is built
with the workspace API, then `SELECT count(*)` over it runs as whole `coord sql` processes:
- first read: the cache of checked slices removed, so every slice is hashed (SHA3-256);
- cached read: the files unchanged since the last check, so none is read;
- unchecked: the same command with the main checkout's code (``--unchecked PATH``), which
  reads the slices without checking them (left out when the path is not given).
Runs alternate (see bench_cli); figures are medians of wall and CPU seconds.
"""
from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this checkout's coordinator
from bench_cli import ROOT, alternate, coord_command, run
from common import print_table

DS = "bench.big"
ROW_BYTES = 48  # about what a row below takes in Parquet: random values do not compress


def build(home: Path, mb: int, slices: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from coordinator.data.hashing import file_logical_hash
    from coordinator.data.slices import output_slice
    from coordinator.metadata import objects as o
    from coordinator.metadata.timestamps import now_utc
    from coordinator.workspace import Workspace
    from coordinator.workspace.fsutil import physical_hash

    ws = Workspace.init(home)
    ds = ws.dataset(DS)
    source = o.DatasetSourceRoot(fetch=o.FetchStepUrl(url="file:///dev/null"),
                                 read=o.ReadStepParquet(), merge=o.MergeStrategyAppend())
    rng = np.random.default_rng(0)
    rows = mb * (1 << 20) // ROW_BYTES // slices
    base = datetime(2024, 1, 1, tzinfo=UTC)
    with ds.writer() as w:
        w.commit(o.MetadataBlock(system_time=now_utc(), source=source))
        for i in range(slices):
            t = now_utc()
            start = base + timedelta(seconds=i * rows)
            table = pa.table({
                "system_time": pa.array(np.full(rows, t), pa.timestamp("us", tz="UTC")),
                "event_time": pa.array(start + np.arange(rows) * timedelta(seconds=1),
                                       pa.timestamp("us", tz="UTC")),
                "id": rng.integers(0, 1 << 62, rows),
                "amount": rng.random(rows),
                "code": pa.array(rng.integers(0, 1 << 62, rows).astype(str)),
            })
            path = ws.run_dir / f"slice-{i}.parquet"
            pq.write_table(table, path)
            logical, n = file_logical_hash(path)
            s = output_slice(logical_hash=logical, physical_hash=physical_hash(path), num_records=n,
                             system_time=t)
            w.commit(o.MetadataBlock(system_time=t, output_slice=s, output_watermark=t), data_file=path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--slices", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="60 MB, 3 runs each")
    ap.add_argument("--unchecked", type=Path, help="a checkout without the check (e.g. main)")
    ap.add_argument("--home", type=Path, help="where to build the workspace (kept; default: a temporary one)")
    args = ap.parse_args()
    mb, repeat = (60, 3) if args.quick else (args.mb, args.repeat)
    import tempfile

    from coordinator.workspace import layout

    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp) / "ws"
        if not (home / ".coord").exists():
            build(home, mb, args.slices)
        size = sum(f.stat().st_size for f in (home / ".coord" / "datasets" / DS / "data").iterdir())
        cache = home / ".coord" / layout.cache_dir(DS, layout.CHECKED_SLICES)
        command = [*coord_command(), "sql", "-o", "csv", "-c", f'SELECT count(*) FROM "{DS}"']
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        run(command, home, env)  # the files in the page cache, as for every contender

        def first() -> tuple[float, float]:
            cache.unlink(missing_ok=True)
            return run(command, home, env)

        contenders = {"first read (hashes every slice)": first,
                      "cached read (files unchanged)": lambda: run(command, home, env)}
        if args.unchecked:
            unchecked_env = {**os.environ, "PYTHONPATH": str(args.unchecked)}
            contenders["unchecked (--unchecked checkout)"] = lambda: run(command, home, unchecked_env)
        times = alternate(contenders, repeat)
        print_table([{"coord sql -c 'SELECT count(*) ...'": name, "wall s": wall, "cpu s": cpu}
                     for name, (wall, cpu) in times.items()],
                    title=f"{size / 1e6:,.0f} MB in {args.slices} slices, median of {repeat}")


if __name__ == "__main__":
    main()
