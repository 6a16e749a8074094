"""A Spark job's own output folders, consumed as a feed (slow: starts a local PySpark).

Spark writes ``part-*`` files, ``.crc`` checksums and an EMPTY ``_SUCCESS`` (Hadoop's output
committer), so its folders are read with ``successMarker: hadoop``: the marker's presence
completes an update. The same folders under the default count marker are reported invalid
and ingested never, with the hint.
"""
import pytest

from coordinator.ingest import pull_root

from ..ingest.conftest import rows_of
from .conftest import add_feed_dataset

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("feed-test")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    yield session
    session.stop()


def test_spark_job_output_folders_are_consumed_as_a_feed(ws, folder_feed, spark):
    runs = {"20240101.000000": [("a", 1), ("b", 2), ("c", 3)], "20240102.000000": [("d", 4)]}
    for name, rows in runs.items():
        df = spark.createDataFrame(rows, "name STRING, value BIGINT").repartition(2)
        df.write.parquet(str(folder_feed.folder / name))
    assert (folder_feed.folder / "20240101.000000" / "_SUCCESS").read_bytes() == b""
    add_feed_dataset(ws, folder_feed, read={"kind": "parquet"}, successMarker="hadoop")

    result = pull_root(ws, "feed.ds")

    assert len(result.blocks) == 2
    got = [(r["name"], r["value"]) for r in rows_of(ws, "feed.ds")]
    expected = [r for rows in runs.values() for r in rows]
    assert sorted(got[:3]) == expected[:3] and got[3:] == expected[3:]


def test_spark_output_under_the_count_marker_is_reported_not_ingested(ws, folder_feed, spark):
    spark.createDataFrame([("a", 1)], "name STRING, value BIGINT").write.parquet(
        str(folder_feed.folder / "20240101.000000"))
    add_feed_dataset(ws, folder_feed, read={"kind": "parquet"})
    result = pull_root(ws, "feed.ds")
    assert result.blocks == []
    assert "set successMarker: hadoop" in result.notes[0]
