"""A Spark job's own output folders, consumed as a feed (a local PySpark writes them once).

Spark writes ``part-*`` files, ``.crc`` checksums and an EMPTY ``_SUCCESS`` (Hadoop's output
committer), so its folders are read with ``successMarker: hadoop``: the marker's presence
completes an update. The same folders under the default count marker are reported invalid
and ingested never, with the hint.
"""
import json
import shutil
import subprocess
import sys

import pytest

from coordinator.ingest import pull_root

from ..ingest.conftest import rows_of
from ..support.cli import coord_env
from ..support.engines import TEST_JAVA_OPTIONS
from .conftest import add_feed_dataset

pytestmark = pytest.mark.spark

RUNS = {"20240101.000000": [("a", 1), ("b", 2), ("c", 3)], "20240102.000000": [("d", 4)]}

# Spark writes the folders in a process of its own: a JVM started from the test process would
# be forked beside the gRPC threads other Spark tests leave there.
WRITER = """
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("feed-test").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.driver.extraJavaOptions", sys.argv[2]).getOrCreate())
for folder, rows in json.loads(sys.argv[1]).items():
    frame = spark.createDataFrame([tuple(r) for r in rows], "name STRING, value BIGINT")
    frame.repartition(2).write.parquet(folder)
spark.stop()
"""


@pytest.fixture(scope="module")
def spark_output(tmp_path_factory):
    """The folders a Spark job wrote for each run of RUNS (part files, .crc, an empty _SUCCESS)."""
    root = tmp_path_factory.mktemp("spark-output")
    jobs = {str(root / name): rows for name, rows in RUNS.items()}
    subprocess.run([sys.executable, "-c", WRITER, json.dumps(jobs), TEST_JAVA_OPTIONS], check=True,
                   env=coord_env(None), capture_output=True, timeout=600)
    return root


def test_spark_job_output_folders_are_consumed_as_a_feed(ws, folder_feed, spark_output):
    for name in RUNS:
        shutil.copytree(spark_output / name, folder_feed.folder / name)
    assert (folder_feed.folder / "20240101.000000" / "_SUCCESS").read_bytes() == b""
    add_feed_dataset(ws, folder_feed, read={"kind": "parquet"}, successMarker="hadoop")

    result = pull_root(ws, "feed.ds")

    assert len(result.blocks) == 2
    got = [(r["name"], r["value"]) for r in rows_of(ws, "feed.ds")]
    expected = [r for rows in RUNS.values() for r in rows]
    assert sorted(got[:3]) == expected[:3] and got[3:] == expected[3:]


def test_spark_output_under_the_count_marker_is_reported_not_ingested(ws, folder_feed, spark_output):
    shutil.copytree(spark_output / "20240101.000000", folder_feed.folder / "20240101.000000")
    add_feed_dataset(ws, folder_feed, read={"kind": "parquet"})
    result = pull_root(ws, "feed.ds")
    assert result.blocks == []
    assert "set successMarker: hadoop" in result.notes[0]
