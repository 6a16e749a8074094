"""A query once, as a batch: a root dataset's preprocess step over the view ``input``, or a
derivative recomputed over its inputs' current rows (a view per input, by its alias).

Unlike Execute there is no stream state: the coordinator hands over Parquet files (freshly
read records, or the rows an input's change log describes), and the result goes back as one
Parquet file, columns as the query made them.
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
        raise EngineFailure(Kind.UNSUPPORTED, "a query run as a batch over current rows has no "
                                              "temporal tables")
    session = spark.newSession()
    frames = {"input": session.read.parquet(request.input_path)} if request.input_path else {}
    frames.update({view.name: session.read.parquet(view.path) for view in request.views})
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
