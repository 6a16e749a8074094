"""The sandboxed engine driving a standalone Spark cluster gives the local engine's results,
and reads the root's files there (``ingest.engine: spark``) as the coordinator would.

A master and one worker (1 core, 1 GiB) run on 127.0.0.1 from the installed PySpark. One
workspace points its engine at the cluster (``allowNetwork``: the sandbox then shares the host
network, so the executors in the worker's JVM reach the driver at 127.0.0.1); a second workspace
uses a local master and the coordinator's own reader. Both pull the same orders pipeline in two
rounds (on the cluster, the second one resumes from the first one's checkpoints in a new engine
process) and must commit slices with the same logical hashes; the blocks record where the
engine ran. The local workspace is only the reference: its pulls attach to the worker's shared
engine (a sandboxed local Spark, tests/support/engines.py) instead of starting two more.

The executors read the engine's staged input files by path, outside the sandbox, so the
engine must stage them in a folder visible at the same path on the host (not its private
/tmp, where Spark's ignoreMissingFiles would silently turn every input into nothing).
"""
from __future__ import annotations

import json

import pytest
import yaml

from ..support import engines as test_engines
from ..support.cli import coord
from .pipeline import HOURLY, LARGE, ORDERS, order_rows, write_manifests, write_orders_file
from .spark_cluster import StandaloneCluster

pytestmark = pytest.mark.engine_start
SANDBOX = {"COORD_ENGINE_RUNTIME": "sandbox"}


@pytest.fixture
def spark_cluster(tmp_path):
    cluster = StandaloneCluster(tmp_path / "spark-cluster", cores=1, memory="1g")
    try:
        yield cluster.start()
    finally:
        processes = list(cluster.processes.values())
        cluster.stop()  # by PID: SIGTERM, then SIGKILL of the daemon's own process group
        assert all(p.poll() is not None for p in processes), "a Spark daemon outlived the test"


def workspace(home, **sections):
    coord("init", "--odf", "0.18", cwd=home)
    if sections:
        config_path = home / ".coord" / "config.yaml"
        config = yaml.safe_load(config_path.read_text()) or {}
        config.update(sections)
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    coord("add", str(write_manifests(home)), cwd=home)
    return home


def blocks(home, dataset_id: str) -> list[dict]:
    return json.loads(coord("log", dataset_id, "-o", "json", cwd=home).stdout)


def slices(home, dataset_id: str) -> list[tuple[str, int]]:
    """(logical hash, records) of every committed data slice, oldest first."""
    return [(b["outputSlice"]["hash"], b["outputSlice"]["numRecords"])
            for b in reversed(blocks(home, dataset_id)) if b.get("outputSlice")]


def engines(home) -> list[dict]:
    return [b["engine"] for d in (LARGE, HOURLY) for b in blocks(home, d) if b.get("engine")]


def test_a_standalone_cluster_gives_the_local_engines_slices(tmp_path_factory, spark_cluster, shared_engine):
    # short paths: the engine's unix socket path in .coord/run must stay under 108 bytes
    on_cluster = workspace(tmp_path_factory.mktemp("cws"), engine={
        "runtime": "sandbox",
        "sparkMaster": spark_cluster.master_url,
        "allowNetwork": True,
        "sparkConf": {"spark.driver.host": "127.0.0.1"},
    }, ingest={"engine": "spark"})
    local = workspace(tmp_path_factory.mktemp("lws"))  # a local master, no network
    env = {on_cluster: SANDBOX, local: {test_engines.ENV: f"attach:{shared_engine}"}}

    rows = order_rows(12)
    for part, chunk in enumerate((rows[:24], rows[24:])):
        for home in (on_cluster, local):
            write_orders_file(home, f"2024-01-0{part + 1}.csv", chunk)
            coord("pull", "-r", HOURLY, LARGE, cwd=home, env=env[home])
    assert not list((on_cluster / ".coord" / "run").glob("*/lease")), "each pull removed its run folder"

    for dataset_id in (ORDERS, LARGE, HOURLY):
        expected = slices(local, dataset_id)
        assert len(expected) == 2 and all(n > 0 for _, n in expected), (dataset_id, expected)
        assert slices(on_cluster, dataset_id) == expected, dataset_id

    assert engines(on_cluster) and engines(local)
    for engine in engines(on_cluster):
        assert engine["sparkMaster"] == spark_cluster.master_url
        assert engine["networkIsolated"] is False
    for engine in engines(local):
        assert engine["sparkMaster"].startswith("local")
        assert engine["networkIsolated"] is True

    # the work really ran on the cluster: one application per pull, and its executors read
    # every input file (the engine's reads are set to skip missing files, so say it here)
    apps = [a for a in spark_cluster.completed_apps() if a.get("name") == "odf-spark-engine"]
    assert len(apps) == 2, spark_cluster.completed_apps()
    executor_logs = "".join(p.read_text(errors="replace")
                            for p in (spark_cluster.work_dir / "worker").rglob("stderr"))
    assert "FileScanRDD: Reading File path" in executor_logs
    assert "source.csv" in executor_logs  # the root's files, read on the cluster
    assert "Skipped missing file" not in executor_logs
