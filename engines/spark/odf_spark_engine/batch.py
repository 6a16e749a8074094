"""A query once, as a batch: a root dataset's preprocess step over the view ``input``, or a
derivative recomputed over its inputs (a view per input, by its alias).

Unlike Execute there is no stream state: the coordinator hands over Parquet files (freshly
read records, the rows an input's change log describes, or a temporal table's history), and
the result goes back as one Parquet file, columns as the query made them. A temporal table is
the view of its versions Execute builds (temporal.py: each version valid until the next of its
key, a removal ending it), joined as of each event's time by the same rewrite and policy; with
every version at hand, each event meets the one in force at its time. The result names its
key columns when the query ends in an aggregation (keys.py).
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from . import temporal
from .errors import run_failure
from .generated import engine_pb2 as pb
from .keys import output_key
from .streaming import check_transform, run_steps


def preprocess(spark: SparkSession, request: pb.PreprocessRequest) -> pb.PreprocessResult:
    check_transform(request.transform)
    tables = temporal.Tables.of(request.transform, request.inputs)
    session = spark.newSession()
    frames = {"input": session.read.parquet(request.input_path)} if request.input_path else {}
    for k, message in enumerate(request.inputs):
        if message.dataset_id in tables.keys:
            # numbered in the file's order, the history's (arrival) order; the view goes
            # beside the output, the one folder the engine writes to
            history = pq.read_table(message.data_paths[0])
            history = history.append_column(temporal.SEQ, pa.array(range(history.num_rows), pa.int64()))
            view = Path(request.output_path).with_name(f"versions-{k}.parquet")
            pq.write_table(temporal.view_of(history, message, tables.keys[message.dataset_id]), view)
            frames[message.dataset_id] = session.read.parquet(str(view))
        else:
            frames[message.dataset_id] = session.read.parquet(*message.data_paths)
    output = run_steps(session, frames, request.transform, tables)
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
        key_columns=output_key(output._jdf.queryExecution().analyzed()),
    )
