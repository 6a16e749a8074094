"""Record provenance (DeriveProvenance): which input records made chosen output records.

The transform is replayed as a batch over the input slices the caller names, each input
carrying one extra column, its row identity (``file:row`` of the data file it was read from).
The steps are planned exactly as ExecuteQuery plans them (``run_steps``: same views, same SQL
policy); the analysed plan is then rewritten so the identities survive every operator
(Perm-style provenance rewriting): a projection keeps them, a filter and a join pass them on
(an outer join's missing side leaves them null), an aggregation collects them into a list per
group. The replayed rows equal to a chosen record are its derivations; their identities are
the input records that made it (why-provenance).

A temporal table (temporal.py) is replayed as the view the block's Execute call joined: built
by ``temporal.view_of`` from every slice the caller names (what the input had when the block
ran), each version carrying the identity of the row that started it. The temporal join is
rewritten as in ExecuteQuery, into a plain join with the validity interval, so an event's
derivation names the version in force at its event time; a removal is no version, so a key
removed before the event (or a left join's missing match) names none.

Invariants:
- Only operators whose row semantics are known here are rewritten; any other operator is an
  UNSUPPORTED failure naming it, never a guess.
- Records match on every column: exactly, except floating-point values, which match within a
  relative 1e-9 (a streaming aggregate adds in another order than the batch replay).
- Nothing is kept: the replay reads the slices and answers the derivations; the temporal
  views it writes for Spark to read go in the transaction's staging folder (as ExecuteQuery's
  do) and are removed when it answers.
- A derivation names each input record once, however many of its rows a group collected
  (an aggregate behind a temporal join meets one version once per event).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from . import temporal
from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb
from .lineage import _class
from .policy import _scala
from .streaming import check_transform, inputs_root, run_steps

ID_PREFIX = "__odf_prov_"  # the identity column an input carries through the replay
RECORD = "__odf_record"  # the caller's key of each record to explain
FLOAT_TOLERANCE = 1e-9

# Operators a row identity passes through unchanged (their output is the child's columns).
PASS_THROUGH = {"Filter", "SubqueryAlias", "View", "Sort", "LogicalRelation", "LocalRelation",
                "OneRowRelation"}
JOINS = {"Inner": "inner join", "LeftOuter": "left outer join", "RightOuter": "right outer join",
         "FullOuter": "full outer join", "Cross": "cross join"}
# Why each refused operator is refused, in the user's words.
REFUSED = {
    "WithCTE": "a WITH clause (write its parts as query steps with aliases instead)",
    "Union": "a UNION", "Distinct": "DISTINCT", "Deduplicate": "a deduplication",
    "Window": "an analytic window function (OVER ...)", "Generate": "explode/stack",
    "Expand": "ROLLUP/CUBE/GROUPING SETS", "GlobalLimit": "LIMIT", "LocalLimit": "LIMIT",
    "Intersect": "INTERSECT", "Except": "EXCEPT",
}


def derive(spark: SparkSession, request: pb.ProvenanceRequest) -> pb.ProvenanceResult:
    check_transform(request.transform)
    tables = temporal.Tables.of(request.transform, request.inputs)
    session = spark.newSession()
    staging = inputs_root(request.dataset_id)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        frames = {i.dataset_id: _temporal_frame(session, i, k, tables.keys[i.dataset_id], staging)
                  if i.dataset_id in tables.keys else _input_frame(session, i, k)
                  for k, i in enumerate(request.inputs)}
        output = run_steps(session, frames, request.transform, tables)
        rewrite = _Rewrite(session)
        plan = rewrite.plan(output._jdf.queryExecution().analyzed())
        replayed = DataFrame(session._jvm.org.apache.spark.sql.classic.Dataset.ofRows(
            session._jsparkSession, rewrite.named_identities(plan)), session)
        records = session.createDataFrame(pa.ipc.open_stream(request.records).read_all())
        inputs = [i.dataset_id for i in request.inputs]
        derivations = _match(replayed, records, rewrite.identities, inputs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, derivations.schema) as writer:
        writer.write_table(derivations)
    return pb.ProvenanceResult(derivations=sink.getvalue().to_pybytes(), stateful=rewrite.stateful)


def _input_frame(session: SparkSession, message: pb.ExecuteInput, k: int) -> DataFrame:
    schema = pa.ipc.read_schema(pa.py_buffer(message.arrow_schema))
    name = ID_PREFIX + str(k)
    if not message.data_paths:
        return session.createDataFrame([], from_arrow_schema(schema)).withColumn(name, F.lit(""))
    frame = session.read.schema(from_arrow_schema(schema)).parquet(*message.data_paths)
    row = F.col("_metadata.row_index").cast("string")
    return frame.select("*", F.concat_ws(":", F.col("_metadata.file_name"), row).alias(name))


def _temporal_frame(session: SparkSession, message: pb.ExecuteInput, k: int, key: tuple[str, ...],
                    staging: Path) -> DataFrame:
    """The temporal table's view of its slices (in arrival order, as ExecuteQuery's history
    numbers them), each version with its row's identity; written to ``staging`` for Spark."""
    schema = pa.ipc.read_schema(pa.py_buffer(message.arrow_schema))
    name = ID_PREFIX + str(k)
    parts, seq = [], 0
    for path in message.data_paths:
        table = pq.read_table(path)
        # 0..n-1 without numpy, which the engine's image does not install
        rows = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), table.num_rows)), 1)
        identity = pc.binary_join_element_wise(os.path.basename(path), pc.cast(rows, pa.string()), ":")
        parts.append(table.append_column(name, identity).append_column(temporal.SEQ, pc.add(rows, seq)))
        seq += table.num_rows
    history = (pa.concat_tables(parts, promote_options="permissive") if parts else
               schema.empty_table().append_column(name, pa.array([], pa.string()))
               .append_column(temporal.SEQ, pa.array([], pa.int64())))
    target = staging / "provenance" / f"{k}.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(temporal.view_of(history, message, key, (name,)), target)
    return session.read.parquet(str(target))


class _Rewrite:
    """The analysed plan rewritten bottom-up to carry every input's identity column."""

    def __init__(self, session: SparkSession):
        self.jvm = session._jvm
        self.stateful = False
        self.identities: list[tuple[str, int, bool]] = []  # (column, input index, is a list)

    def plan(self, node):
        kind = _class(node)
        if kind in REFUSED:
            raise _unsupported(REFUSED[kind])
        if kind == "Join":
            join = node.joinType().toString()
            if join not in JOINS:
                raise _unsupported(f"a {join} join")
            self.stateful = True
        elif kind == "Aggregate":
            self.stateful = True
        elif kind not in PASS_THROUGH and kind != "Project":
            raise _unsupported(f"a {kind} operator")
        children = [self.plan(child) for child in _scala(node.children())]
        if children:
            node = node.withNewChildren(self._seq(children))
        if kind == "Project":
            kept = {a.exprId().id() for a in _scala(node.projectList())}
            extra = [a for a in self._ids(node.child()) if a.exprId().id() not in kept]
            node = node.copy(self._seq([*_scala(node.projectList()), *extra]), node.child())
        elif kind == "Aggregate":
            collected = [self._alias(self._collect(a), a.name()) for a in self._ids(node.child())]
            node = node.copy(node.groupingExpressions(),
                             self._seq([*_scala(node.aggregateExpressions()), *collected]),
                             node.child(), node.hint())
        return node

    def named_identities(self, plan):
        """``plan`` with its identity columns renamed apart (a self-join carries one input's
        identity twice) and recorded in ``identities``."""
        columns = []
        for attr in _scala(plan.output()):
            if not attr.name().startswith(ID_PREFIX):
                columns.append(attr)
                continue
            name = f"{ID_PREFIX}{len(self.identities)}"
            is_list = _class(attr.dataType()) == "ArrayType"
            self.identities.append((name, int(attr.name()[len(ID_PREFIX):].split("_")[0]), is_list))
            columns.append(self._alias(attr, name))
        return self.jvm.org.apache.spark.sql.catalyst.plans.logical.Project(self._seq(columns), plan)

    # ----- Catalyst pieces ----------------------------------------------------------------

    def _ids(self, node) -> list:
        return [a for a in _scala(node.output()) if a.name().startswith(ID_PREFIX)]

    def _collect(self, attr):
        aggregate = self.jvm.org.apache.spark.sql.catalyst.expressions.aggregate
        collected = aggregate.CollectList(attr).toAggregateExpression()
        if _class(attr.dataType()) == "ArrayType":  # an aggregate over an aggregate
            return self.jvm.org.apache.spark.sql.catalyst.expressions.Flatten(collected)
        return collected

    def _alias(self, expression, name: str):
        e = self.jvm.org.apache.spark.sql.catalyst.expressions
        return e.Alias(expression, name, e.NamedExpression.newExprId(), self._seq([]),
                       self.jvm.scala.Option.empty(), self._seq([]))

    def _seq(self, items: list):
        return self.jvm.PythonUtils.toSeq(items)


def _match(replayed: DataFrame, records: DataFrame, identities, inputs: list[str]) -> pa.Table:
    """One row per input record of each derivation of each record."""
    columns = [c for c in records.columns if c != RECORD]
    missing = [c for c in columns if c not in replayed.columns]
    if missing:
        raise EngineFailure(Kind.INVALID_REQUEST, f"the query has no column {missing[0]}")
    r, o = replayed.alias("r"), records.alias("o")
    condition = F.lit(True)
    for c in columns:
        left, right = F.col(f"r.`{c}`"), F.col(f"o.`{c}`")
        if dict(records.dtypes)[c] in ("double", "float"):
            scale = F.greatest(F.abs(left), F.abs(right), F.lit(1.0))
            near = F.abs(left - right) <= F.lit(FLOAT_TOLERANCE) * scale
            condition &= left.eqNullSafe(right) | F.coalesce(near, F.lit(False))
        else:
            condition &= left.eqNullSafe(right)
    matched = r.join(o, condition).select(
        F.col(f"o.{RECORD}").alias("record"),
        *[F.col(f"r.{name}") for name, _, _ in identities],
    ).toArrow()
    parts = [pa.table({"record": pa.array([], pa.int64()), "derivation": pa.array([], pa.int64()),
                       "input": pa.array([], pa.string()), "file": pa.array([], pa.string()),
                       "row": pa.array([], pa.int64())})]
    for name, k, is_list in identities:
        values = matched.column(name).combine_chunks()
        index = pa.array(range(matched.num_rows), pa.int64())  # the derivation: a replayed row
        if is_list:
            parents = pc.list_parent_indices(values)
            index, values = pc.take(index, parents), pc.list_flatten(values)
        valid = pc.is_valid(values)
        index, values = index.filter(valid), values.filter(valid)
        split = pc.split_pattern(values, ":", max_splits=1, reverse=True)
        parts.append(pa.table({
            "record": pc.take(matched.column("record"), index),
            "derivation": index,
            "input": pa.array([inputs[k]] * len(index), pa.string()),
            "file": pc.list_element(split, 0),
            "row": pc.cast(pc.list_element(split, 1), pa.int64()),
        }))
    found = pa.concat_tables(parts)
    return found.group_by(found.column_names, use_threads=False).aggregate([]).combine_chunks()


def _unsupported(shape: str) -> EngineFailure:
    return EngineFailure(Kind.UNSUPPORTED, f"provenance: not supported for this query: {shape}")
