"""A root dataset's preprocess step, run in the command's engine (Spark SQL over ``input``)."""
from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from ..metadata.objects import TransformSql
from .engine_session import EngineSession


def run_preprocess(session: EngineSession, dataset_id: str, table: pa.Table,
                   transform: TransformSql) -> pa.Table:
    scratch = session.scratch(f"preprocess-{uuid.uuid4().hex[:12]}")
    source, result = scratch / "input.parquet", scratch / "output.parquet"
    pq.write_table(table, source)
    session.client.preprocess(dataset_id, source, transform, result, transaction_id=scratch.name)
    return pq.read_table(result)
