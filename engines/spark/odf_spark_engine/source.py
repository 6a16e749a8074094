"""A root dataset's read step in Spark (``ingest.engine: spark``): one source file → Parquet.

The coordinator keeps the chain (merge, hashes, commits); the engine only parses, so a cluster
does the reading. The records come back as Parquet part files in the file's record order:

- Spark cuts the file into splits of about ``split_bytes``; a task reads its split's records
  in order and writes them as one part file. Which task ends up with which part number is
  Spark's scheduling business, so every record carries its split's start offset
  (``_metadata.file_block_start``, as the column ``__odf_block``) and the parts are ordered
  by it. The coordinator reads only the schema's columns.
- Values are typed as the request's schema says, with Spark's ``FAILFAST`` mode: a malformed
  record or a value that does not fit its type fails the request instead of becoming null.
"""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb

BLOCK_COLUMN = "__odf_block"  # the start offset of the record's split
# "Caused by: org.apache.spark.SparkException: [MALFORMED_RECORD_IN_PARSING.X] " and the like
_JAVA_PREFIX = re.compile(r"^(?:Caused by: )?(?:[\w.$]+(?:Exception|Error): )?(?:\[[A-Z_.]+\] )?")


def read_source(spark: SparkSession, request: pb.ReadSourceRequest) -> pb.ReadSourceResult:
    schema = pa.ipc.read_schema(pa.py_buffer(request.arrow_schema))
    session = spark.newSession()
    if request.split_bytes:
        session.conf.set("spark.sql.files.maxPartitionBytes", str(request.split_bytes))
    session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    reader = session.read.schema(from_arrow_schema(schema)).options(**dict(request.options))
    if request.format == "csv":
        frame = reader.option("mode", "FAILFAST").csv(request.input_path)
    elif request.format == "jsonLines":
        frame = reader.option("mode", "FAILFAST").json(request.input_path)
    elif request.format == "parquet":
        frame = reader.parquet(request.input_path)
    else:
        raise EngineFailure(Kind.UNSUPPORTED, f"reading {request.format!r} files in the engine "
                                              "is not supported (csv, jsonLines, parquet are)")
    frame = frame.select(*[F.col(f"`{name}`") for name in schema.names],
                         F.col("_metadata.file_block_start").alias(BLOCK_COLUMN))
    out = Path(request.output_dir) / "parts"
    try:
        frame.write.parquet(str(out))
    except Exception as exc:
        raise EngineFailure(Kind.EXECUTION, _reason(exc)) from exc
    parts, records = [], 0
    for path in out.glob("*.parquet"):
        meta = pq.ParquetFile(path).metadata
        if meta.num_rows:
            block = meta.schema.names.index(BLOCK_COLUMN)
            parts.append((meta.row_group(0).column(block).statistics.min, path))
            records += meta.num_rows
    return pb.ReadSourceResult(parts=[str(p) for _, p in sorted(parts)], num_records=records)


def _reason(exc: Exception) -> str:
    """The first line that says what is wrong with the data (Spark wraps it in job failures),
    without the Java exception's class and Spark's error class."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    found = next((line for line in lines if "Malformed" in line or "Cannot parse" in line
                  or "cannot be cast" in line.lower()), lines[0] if lines else type(exc).__name__)
    return _JAVA_PREFIX.sub("", found)
