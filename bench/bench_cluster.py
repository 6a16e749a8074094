"""Spark doing the heavy lifting: root files read in the engine, and a derivative over ~20 M rows,
on the engine's local Spark and on a standalone cluster on loopback.

    python bench/bench_cluster.py [--gb 1.3] [--workers 2] [--quick]

Whole ``coord`` processes, each in a fresh workspace over the same CSV files (``--gb`` in 4
files, generated as ``bench_scale.py`` does):

1. ``coord pull`` of the append root with ``ingest.engine`` ``coordinator`` (the baseline),
   then ``spark`` on the engine's ``local[2]``, then ``spark`` on the cluster (``--workers``
   workers of 1 core and ``--worker-memory`` each, started from the installed PySpark; the
   sandboxed engine drives it with ``allowNetwork``). Peak RSS is the ``coord`` process's own
   (``RUSAGE_SELF`` at its exit: a child's ``wait4`` figure would count the engine's JVM, a
   descendant); the engine's JVMs are sized by the settings printed below the tables.
2. ``coord pull`` of a derivative over that root (a filter and a computed column, half the
   rows out) on ``local[2]`` and on the cluster, beside the same query as a plain PySpark batch
   job (``local[2]``, Parquet in and out, whole process) and as DuckDB (whole process).

``--quick``: 0.3 GB.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_cli import coord_command
from bench_scale import DS, MANIFEST, in_child, measured, write_csv
from common import print_table

from coordinator.workspace import Workspace

HERE = Path(__file__).resolve().parent
DERIVED = "bench.derived"
QUERY = f"SELECT at, id, city, amount * 1.1 AS gross FROM `{DS}` WHERE amount >= 500"
DERIVED_MANIFEST = f"""apiVersion: 1
kind: DatasetSnapshot
content:
  id: {DERIVED}
  source:
    kind: derivative
    inputs: [{DS}]
    transform: {{kind: sql, engine: spark, query: "{QUERY}"}}
  vocab: {{eventTimeColumn: at}}
"""
# The derivative's output comes back through the driver (one slice, one file): the driver
# needs room for it, here about 0.6 GB of Arrow for 10 M rows.
DRIVER = {"spark.driver.memory": "3g", "spark.driver.maxResultSize": "3g"}
PYSPARK_BATCH = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "3g").getOrCreate())
spark.read.parquet(*sys.argv[2:]).createOrReplaceTempView("t")
spark.sql("SELECT at, id, city, amount * 1.1 AS gross FROM t WHERE amount >= 500") \\
    .write.parquet(sys.argv[1])
"""
DUCKDB_QUERY = """
import sys, duckdb
files = ", ".join(f"'{f}'" for f in sys.argv[2:])
duckdb.sql(f'COPY (SELECT "at", id, city, amount * 1.1 AS gross FROM read_parquet([{files}]) '
           f"WHERE amount >= 500) TO '{sys.argv[1]}' (FORMAT parquet)")
"""


# `coord` in this Python, reporting its own peak RSS (not its descendants') into $RSS_FILE
OWN_RSS = """
import atexit, os, resource, sys
atexit.register(lambda: open(os.environ["RSS_FILE"], "w").write(
    str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
from coordinator.cli.main import main
main(sys.argv[1:])
"""


def measured_coord(args: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, the coord process's own peak RSS in GB) of ``coord ARGS``."""
    rss_file = cwd / "rss"
    wall, _ = measured([sys.executable, "-c", OWN_RSS, *args], cwd, {**env, "RSS_FILE": str(rss_file)})
    return wall, int(rss_file.read_text()) * 1024 / 1e9


def workspace(home: Path, sources: list[Path], config: dict, coord: list[str], env: dict) -> Path:
    (home / "in").mkdir(parents=True)
    for path in sources:
        os.link(path, home / "in" / path.name)
    (home / "m.yaml").write_text(MANIFEST)
    (home / "d.yaml").write_text(DERIVED_MANIFEST)
    subprocess.run([*coord, "init", "--odf", "0.18"], cwd=home, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    path = home / ".coord" / "config.yaml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **config}, sort_keys=False))
    for manifest in ("m.yaml", "d.yaml"):
        subprocess.run([*coord, "add", manifest], cwd=home, env=env, check=True, stdout=subprocess.DEVNULL)
    return home


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="2g")
    ap.add_argument("--quick", action="store_true", help="0.3 GB")
    args = ap.parse_args()
    if args.quick:
        args.gb = 0.3
    sys.path.insert(0, str(HERE.parent))
    from tests.transform.spark_cluster import StandaloneCluster

    env = {**os.environ, "COORD_ENGINE_RUNTIME": "sandbox",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    coord = coord_command()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=os.environ.get("BENCH_TMP")))
    try:
        sources, records = [], 0
        for k in range(4):
            sources.append(tmp / f"part-{k}.csv")
            records += in_child(write_csv, sources[-1], args.gb / 4, records)
        size = sum(p.stat().st_size for p in sources) / 1e9
        with StandaloneCluster(tmp / "cluster", cores=1, memory=args.worker_memory,
                               workers=args.workers) as cluster:
            executor = {"spark.executor.memory": args.worker_memory, "spark.executor.cores": "1",
                        "spark.cores.max": str(args.workers), "spark.driver.host": "127.0.0.1"}
            setups = {
                "coordinator": {"engine": {"sparkConf": DRIVER}},
                "spark, local[2]": {"engine": {"sparkConf": DRIVER}, "ingest": {"engine": "spark"}},
                f"spark, cluster of {args.workers}": {
                    "engine": {"sparkMaster": cluster.master_url, "allowNetwork": True,
                               "sparkConf": {**DRIVER, **executor}},
                    "ingest": {"engine": "spark"}},
            }
            ingest, derive, homes = [], [], {}
            for k, (name, config) in enumerate(setups.items()):
                homes[name] = home = workspace(tmp / f"ws{k}", sources, config, coord, env)
                wall, rss = measured_coord(["pull", DS], home, env)
                blocks = len(Workspace.open(home).dataset(DS).state().data_blocks)
                ingest.append({"input": f"{size:.2f} GB CSV, 4 files, {records:,} rows",
                               "files read by": name, "coord pull s": wall,
                               "coord peak RSS GB": rss, "blocks": blocks})
            for row in ingest:
                row["ratio"] = row["coord pull s"] / ingest[0]["coord pull s"]
            cluster_name = f"cluster of {args.workers}"
            for name, home in (("local[2]", homes["coordinator"]),
                               (cluster_name, homes[f"spark, {cluster_name}"])):
                wall, rss = measured_coord(["pull", DERIVED], home, env)
                out = Workspace.open(home).dataset(DERIVED).state()
                derive.append({"query": f"filter + computed column over {records:,} rows",
                               "run by": f"coord, engine on {name}", "coord pull s": wall,
                               "coord peak RSS GB": rss, "records out": out.num_records})
            slices = [str(p) for p in Workspace.open(homes["coordinator"]).dataset(DS).data_files()]
            for name, script in (("PySpark batch job, local[2]", PYSPARK_BATCH),
                                 ("DuckDB", DUCKDB_QUERY)):
                wall, rss = measured([sys.executable, "-c", script, str(tmp / f"out-{len(derive)}"),
                                      *slices], tmp, env)
                derive.append({"query": "the same query, Parquet in and out", "run by": name,
                               "coord pull s": wall, "coord peak RSS GB": rss, "records out": ""})
            for row in derive:
                row["ratio"] = row["coord pull s"] / derive[-2]["coord pull s"]
        print_table(ingest, title="coord pull of a root, files read by the coordinator or by Spark")
        print_table(derive, title="coord pull of a derivative over that root (ratio: to the plain "
                                  "PySpark job)")
        print(f"engine: sparkConf {DRIVER} (the driver holds a derivative's output slice); on the "
              f"cluster also {executor}; workers: 1 core, {args.worker_memory} each")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
