"""A root dataset's preprocess step, run in the command's engine (Spark SQL over ``input``)."""
from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from ..engine.port import Engine
from ..metadata.objects import TransformSql


def run_preprocess(engine: Engine, dataset_id: str, table: pa.Table,
                   transform: TransformSql) -> pa.Table:
    scratch = engine.workdir(f"preprocess-{uuid.uuid4().hex[:12]}")
    source, result = scratch / "input.parquet", scratch / "output.parquet"
    pq.write_table(table, source)
    engine.preprocess(dataset_id, source, transform, result, transaction_id=scratch.name)
    return pq.read_table(result)
