"""Spark's classes archived for the JVM (dynamic AppCDS), so that an engine starts faster.

Most of a Spark driver's start is the JVM loading, verifying and linking some 20,000 classes.
A class archive made once (``python -m odf_spark_engine.class_archive OUT``: a session runs a
small representative workload with ``-XX:ArchiveClassesAtExit``) lets later JVMs map those
classes instead. It depends only on the JVM and Spark's jars, never on data or queries, so
it changes nothing an engine computes. Where it lives:
- the container image makes its own at build time (engines/spark/Dockerfile) and names it
  in ``ODF_SPARK_CLASS_ARCHIVE``;
- the sandbox runtime mounts the host's, read-only, when ``coord system prepare`` made one
  (coordinator/engine/class_archive.py), and names it there.
A missing, stale or unreadable archive only costs the speed: ``-Xshare:auto`` starts the JVM
without it (its complaint is logged nowhere: ``-Xlog:cds*=off``).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ARCHIVE_ENV = "ODF_SPARK_CLASS_ARCHIVE"
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"


def with_archive(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the driver's JVM told to map the archive ``ARCHIVE_ENV`` names, if there
    is one; the user's own driver options follow ours (a later flag wins in Java)."""
    archive = os.environ.get(ARCHIVE_ENV)
    if not archive or not Path(archive).is_file():
        return conf
    ours = f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds*=off"
    theirs = conf.get(JAVA_OPTIONS_KEY, "")
    return {**conf, JAVA_OPTIONS_KEY: f"{ours} {theirs}".strip()}


def _workload(spark, folder: Path) -> None:
    """What engines do, in small: Parquet in and out, SQL with joins, windows and aggregates,
    and a watermarked streaming aggregation, so their classes are loaded (and archived)."""
    from pyspark.sql import functions as F

    events = folder / "events"
    (spark.range(1000)
     .select((F.col("id") % 10).alias("key"), F.col("id").alias("value"),
             F.timestamp_seconds(F.col("id") * 60).alias("event_time"))
     .write.parquet(str(events)))
    spark.read.parquet(str(events)).createOrReplaceTempView("events")
    spark.sql("""
        SELECT e.key, sum(e.value) AS total, max(e.event_time) AS last,
               row_number() OVER (ORDER BY e.key) AS n
        FROM events e JOIN (SELECT DISTINCT key FROM events) k ON e.key = k.key
        GROUP BY e.key
    """).collect()
    stream = (spark.readStream.schema(spark.read.parquet(str(events)).schema).parquet(str(events))
              .withWatermark("event_time", "1 hour")
              .groupBy(F.window("event_time", "1 hour"), "key").agg(F.count("*").alias("n")))
    query = (stream.writeStream.outputMode("append").format("parquet")
             .option("path", str(folder / "out")).option("checkpointLocation", str(folder / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination()


def make(out: Path) -> None:
    """Runs the workload in a JVM that archives its classes at exit, and puts the archive at
    ``out`` whole (written beside it, then renamed) once that JVM has exited."""
    from .server import create_spark

    os.environ.pop(ARCHIVE_ENV, None)  # a JVM archives only over the JDK's own archive
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory() as work:
        spark = create_spark("local[2]", {JAVA_OPTIONS_KEY: f"-XX:ArchiveClassesAtExit={partial}"})
        _workload(spark, Path(work))
        gateway = spark.sparkContext._gateway
        spark.stop()
        # The JVM writes the archive as it exits, which it does when its stdin closes.
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=300)
    if not partial.is_file():
        raise SystemExit(f"the JVM wrote no class archive at {partial}")
    os.replace(partial, out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m odf_spark_engine.class_archive OUT")
    make(Path(sys.argv[1]))
