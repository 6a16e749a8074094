"""A root dataset's preprocess step: the query once, as a batch, over the view ``input``.

Unlike Execute there is no stream state: the ingest step hands over one file of freshly read
records, and the result goes back as one Parquet file, columns as the query made them.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from . import temporal
from .errors import EngineFailure, Kind, run_failure
from .generated import engine_pb2 as pb
from .streaming import check_transform, run_steps


def preprocess(spark: SparkSession, request: pb.PreprocessRequest) -> pb.PreprocessResult:
    check_transform(request.transform)
    if request.transform.temporal_tables:
        raise EngineFailure(Kind.UNSUPPORTED, "a root's preprocess reads only `input`: "
                                              "it has no temporal tables")
    session = spark.newSession()
    frames = {"input": session.read.parquet(request.input_path)}
    output = run_steps(session, frames, request.transform, temporal.NONE)
    schema = to_arrow_schema(output.schema, timezone="UTC")
    try:
        table = output.toArrow()
    except Exception as exc:
        raise run_failure(exc) from exc
    table = table.cast(schema) if table.num_rows else schema.empty_table()
    target = Path(request.output_path)
    partial = target.with_name(target.name + ".partial")
    pq.write_table(table, partial)
    os.replace(partial, target)
    ddl = output._jdf.schema().toDDL()
    return pb.PreprocessResult(
        num_records=table.num_rows,
        schema=pb.OutputSchema(arrow_schema=schema.serialize().to_pybytes(), ddl=ddl),
    )
