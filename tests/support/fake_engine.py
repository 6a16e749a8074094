"""A test engine: the engine port (``coordinator.engine.port.Engine``) run by DuckDB.

It lets the fast suite cover a derivative's planning → execute → commit without Spark, for
the queries whose streaming answer is also their batch answer: projections, filters, inner
joins and UNION ALL over the inputs ("monotonic" queries: more input never takes an output
row back). It keeps the real engine's contract (port.py, docs/architecture.md):

- output slice: ``system_time`` (the request's), the output event time column, the data
  columns; rows sorted by those columns; no file when there are no records;
- each call emits the rows the new input slices add: the query over every slice consumed so
  far minus (as a multiset) the query over the slices consumed before this call, so a join
  matches a new row with old ones as Spark's stream-stream join does;
- an input's watermark is the latest of its explicit watermarks and, unless the transform's
  rule is ``inputWatermarks: recorded``, the event times seen;
  the output watermark is the least input watermark (None while an input has none) and
  never moves back;
- its checkpoint is one JSON file: per input, the watermark and the slices consumed.

Its row mapping (``derive_row_mapping``) reads DuckDB's parse tree of a one-step query: one
SELECT over one input, without GROUP BY, aggregates, windows, DISTINCT, ORDER BY / LIMIT,
joins, set operations or subqueries, is row-wise; its copies are the plain column references
(aliased or not) and ``*``, its filtered columns those its WHERE clause names, each output
column's sources the columns it names. Anything else is named as Spark names it ("Aggregate",
"Join", ...).

SQL DuckDB refuses is an ``EngineQueryError`` (INVALID_QUERY), as the real engine's answer is
(``port.engine_error``). It refuses, as UNSUPPORTED, what needs streaming state (aggregations,
windows, DISTINCT, ORDER BY / LIMIT, set operations that remove rows) and temporal tables:
those stay in the Spark tests. Spark SQL
is run as DuckDB SQL with `backquoted` names turned into "quoted" ones.

``coord(..., fake_engine=True)`` (tests/support/cli.py) runs ``coord`` with this engine in
place of the configured one (``factory.use_engine``).
"""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from coordinator.engine.port import (
    EngineError,
    EngineErrorKind,
    EngineProgress,
    ExecuteRequest,
    ExecuteResult,
    LineageRequest,
    MigrateRequest,
    MigrateResult,
    PreprocessRequest,
    PreprocessResult,
    ProvenanceRequest,
    ProvenanceResult,
    ReadSourceRequest,
    RowMapping,
    RowMappingRequest,
    ValidateRequest,
    ValidateResult,
    engine_error,
)
from coordinator.engine.settings import EngineSettings
from coordinator.metadata.objects import (
    DatasetVocabulary,
    EngineIdentity,
    FieldLineage,
    InputWatermarks,
    TransformSql,
)
from coordinator.metadata.timestamps import format_timestamp, parse_timestamp

STATE_FILE = "fake-engine.json"
SYSTEM_TIME_TYPE = pa.timestamp("us", tz="UTC")
_BACKQUOTED = re.compile(r"`((?:[^`]|``)*)`")


class FakeEngine:
    """The ``Engine`` port over DuckDB, writing only under ``run_dir``."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.identity = EngineIdentity(runtime="fake", version=f"duckdb {duckdb.__version__}",
                                       network_isolated=True)

    def workdir(self, name: str) -> Path:
        path = self.run_dir / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def validate(self, request: ValidateRequest) -> ValidateResult:
        tables = {i.dataset_id: i.schema.empty_table() for i in request.inputs}
        schema = _output(_run_streaming(request.transform, tables), request.vocab).schema
        return ValidateResult(schema, _ddl(schema))

    def execute(self, request: ExecuteRequest) -> ExecuteResult:
        state = _load_state(request.prev_checkpoint_dir)
        before: dict[str, pa.Table] = {}
        after: dict[str, pa.Table] = {}
        watermarks: list[datetime | None] = []
        for i in request.inputs:
            seen = state["inputs"].get(i.dataset_id, {"watermark": None, "paths": []})
            paths = [str(p) for p in i.data_paths]
            candidates = [_time(seen["watermark"]), *(event for _, event in i.explicit_watermarks)]
            if request.transform.input_watermarks is not InputWatermarks.RECORDED:
                candidates += [_max_event_time(p, i.vocab.event_time) for p in paths]
            known = [t for t in candidates if t is not None]
            watermark = max(known) if known else None
            state["inputs"][i.dataset_id] = {"watermark": _text(watermark), "paths": seen["paths"] + paths}
            before[i.dataset_id] = _read(seen["paths"], i.schema)
            after[i.dataset_id] = _read(seen["paths"] + paths, i.schema)
            watermarks.append(watermark)
            if request.on_progress is not None:
                request.on_progress(EngineProgress("log", f"input {i.dataset_id}: {len(paths)} new slice(s)"))

        new_rows = _difference(_run_streaming(request.transform, after),
                               _run_streaming(request.transform, before))
        table = _output(new_rows, request.vocab, request.system_time)
        known_all = [w for w in watermarks if w is not None]
        output_watermark = min(known_all) if known_all and len(known_all) == len(watermarks) else None
        previous = _time(state["output_watermark"])
        if previous is not None and (output_watermark is None or output_watermark < previous):
            output_watermark = previous
        state["output_watermark"] = _text(output_watermark)

        request.new_checkpoint_dir.mkdir(parents=True, exist_ok=True)
        (request.new_checkpoint_dir / STATE_FILE).write_text(json.dumps(state, indent=1))
        if table.num_rows:
            pq.write_table(table, request.output_data_path)
        # it refuses temporal tables, the only rows an engine holds back: none ever wait
        return ExecuteResult(table.num_rows, output_watermark, table.schema, _ddl(table.schema),
                             request.output_data_path if table.num_rows else None, pending_rows=())

    def migrate(self, request: MigrateRequest) -> MigrateResult:
        _run_streaming(request.next_transform, {}, plan_only=True)
        new_checkpoint = request.new_checkpoint_dir
        new_checkpoint.mkdir(parents=True, exist_ok=True)
        state = _load_state(request.prev_checkpoint_dir)
        (new_checkpoint / STATE_FILE).write_text(json.dumps(state, indent=1))
        # this engine's only state is the watermarks and the slices consumed: both carry over
        return MigrateResult(True, "watermarks and consumed slices carried over")

    def preprocess(self, request: PreprocessRequest) -> PreprocessResult:
        if request.transform.temporal_tables:
            raise EngineError(EngineErrorKind.UNSUPPORTED, "the test engine recomputes no temporal join")
        tables = {i.dataset_id: pq.read_table(i.data_paths[0]) for i in request.inputs}
        if request.input_path is not None:
            tables["input"] = pq.read_table(request.input_path)
        table = _run(request.transform, tables)
        pq.write_table(table, request.output_path)
        return PreprocessResult(table.num_rows)  # no key: every change a retraction and an append

    def read_source(self, request: ReadSourceRequest) -> list[Path]:
        """Arrow's readers with the options the tests use (sep, header, nullValue); parts of
        about ``split_bytes`` of the file each, as the real engine splits."""
        input_path, format, options, schema = (request.input_path, request.format, request.options,
                                               request.schema)
        split_bytes, output_dir = request.split_bytes, request.output_dir
        try:
            if format == "csv":
                table = pacsv.read_csv(
                    input_path,
                    read_options=pacsv.ReadOptions(column_names=schema.names,
                                                   skip_rows=int(options.get("header") == "true")),
                    parse_options=pacsv.ParseOptions(delimiter=options.get("sep", ",")),
                    convert_options=pacsv.ConvertOptions(
                        column_types=schema, null_values=[options.get("nullValue", "")],
                        strings_can_be_null=True, quoted_strings_can_be_null=False))
            elif format == "parquet":
                table = pq.read_table(input_path, columns=schema.names)
            else:
                table = pajson.read_json(input_path,
                                         parse_options=pajson.ParseOptions(explicit_schema=schema))
        except pa.ArrowInvalid as e:
            raise EngineError(EngineErrorKind.EXECUTION, str(e)) from None
        size = max(1, input_path.stat().st_size)
        rows = max(1, table.num_rows * split_bytes // size) if split_bytes else max(1, table.num_rows)
        parts = []
        for k, start in enumerate(range(0, table.num_rows, rows)):
            parts.append(output_dir / f"part-{k:05d}.parquet")
            pq.write_table(table.slice(start, rows), parts[-1])
        return parts

    def derive_field_lineage(self, request: LineageRequest) -> FieldLineage:
        raise EngineError(EngineErrorKind.UNSUPPORTED, "the test engine derives no field lineage")

    def derive_row_mapping(self, request: RowMappingRequest) -> RowMapping:
        steps = request.transform.steps()
        if len(steps) != 1:
            raise EngineError(EngineErrorKind.UNSUPPORTED, "the test engine maps the rows of "
                              "one-step queries only: more steps need the Spark engine")
        [statement] = _parsed(steps[0].query)["statements"]
        node = statement["node"]
        operator = _row_operator(node, _aggregates())
        if operator is not None:
            return RowMapping(operator, None, {})
        table = node["from_table"]["table_name"]
        [columns] = [i.schema.names for i in request.inputs if i.dataset_id == table]
        copies: dict[str, str] = {}
        sources: dict[str, tuple[str, ...]] = {}
        for item in node["select_list"]:
            if item["class"] == "STAR" and not (item["exclude_list"] or item["replace_list"]
                                                or item["rename_list"]):
                copies.update({c: c for c in columns})
                sources.update({c: (c,) for c in columns})
            elif item["class"] == "COLUMN_REF":
                column = item["column_names"][-1]
                copies[item["alias"] or column] = column
                sources[item["alias"] or column] = (column,)
            else:  # an expression: DuckDB names it by its alias (the tests give one)
                sources[item["alias"]] = tuple(sorted(_column_refs(item)))
        return RowMapping(None, table, copies, tuple(sorted(_column_refs(node.get("where_clause")))),
                          sources)

    def derive_provenance(self, request: ProvenanceRequest) -> ProvenanceResult:
        raise EngineError(EngineErrorKind.UNSUPPORTED,
                          "provenance: not supported for this query: the test engine derives no provenance")

    def close(self) -> None:
        pass


@contextmanager
def open_fake_engine(settings: EngineSettings, run_dir: Path,
                     read_only_paths: list[Path]) -> Iterator[FakeEngine]:
    engine = FakeEngine(run_dir)
    try:
        yield engine
    finally:
        engine.close()


# ----- running the query ----------------------------------------------------------------------


def _run_streaming(transform: TransformSql, tables: dict[str, pa.Table], *,
                   plan_only: bool = False) -> pa.Table:
    """The query as Execute runs it: refused unless its streaming answer is its batch one."""
    if transform.temporal_tables:
        raise EngineError(EngineErrorKind.UNSUPPORTED, "the test engine has no temporal tables: "
                          "temporal joins need the Spark engine")
    for step in transform.steps():
        _refuse_stateful(step.query)
    return pa.table({}) if plan_only else _run(transform, tables)


def _run(transform: TransformSql, tables: dict[str, pa.Table]) -> pa.Table:
    """The steps in DuckDB: inputs and aliased steps are views by name; the output step's rows."""
    steps = transform.steps()
    unaliased = [k for k, s in enumerate(steps) if not s.alias]
    output_step = unaliased[0] if unaliased else len(steps) - 1
    con = _connect()
    for name, table in tables.items():
        con.register(name, table)
    try:
        for k, step in enumerate(steps):
            sql = _duckdb_sql(step.query)
            if k == output_step:
                return con.sql(sql).to_arrow_table()
            con.execute(f"CREATE TEMPORARY VIEW {_quote(step.alias or '')} AS {sql}")
    except duckdb.Error as e:
        raise engine_error(EngineErrorKind.INVALID_QUERY, f"step {k}: {e}") from None
    finally:
        con.close()
    raise EngineError(EngineErrorKind.INVALID_REQUEST, "the transform has no query")


def _parsed(query: str) -> dict:
    """DuckDB's parse tree of ``query`` (json_serialize_sql)."""
    con = _connect()
    try:
        [(text,)] = con.execute("SELECT json_serialize_sql(?)", [_duckdb_sql(query)]).fetchall()
        tree = json.loads(text)
    finally:
        con.close()
    if tree.get("error"):  # Spark's window(...) among others
        raise EngineError(EngineErrorKind.UNSUPPORTED,
                          f"the test engine cannot parse the query ({tree.get('error_message')}); "
                          "Spark SQL beyond DuckDB's needs the Spark engine")
    return tree


def _refuse_stateful(query: str) -> None:
    reason = _stateful_part(_parsed(query), _aggregates())
    if reason:
        raise EngineError(EngineErrorKind.UNSUPPORTED, f"the test engine runs stateless queries only; "
                          f"{reason} needs the Spark engine's streaming state")


def _stateful_part(node: Any, aggregates: frozenset[str]) -> str | None:
    """What in a parsed query (json_serialize_sql) keeps state across input slices, if any."""
    if isinstance(node, list):
        return next((r for r in (_stateful_part(n, aggregates) for n in node) if r), None)
    if not isinstance(node, dict):
        return None
    if node.get("group_expressions") or node.get("having"):
        return "GROUP BY"
    if node.get("modifiers"):
        return node["modifiers"][0]["type"].removesuffix("_MODIFIER").replace("_", " ")
    if node.get("class") == "WINDOW":
        return f"the window function {node.get('function_name')}"
    if node.get("class") == "FUNCTION" and node.get("function_name") in aggregates:
        return f"the aggregate {node['function_name']}"
    union_all = node.get("setop_type") == "UNION" and node.get("setop_all")
    if node.get("type") == "SET_OPERATION_NODE" and not union_all:
        return node.get("setop_type", "a set operation")
    return _stateful_part(list(node.values()), aggregates)


def _row_operator(node: dict, aggregates: frozenset[str]) -> str | None:
    """The first part of a parsed SELECT that is not a projection or filter over one input,
    as Spark's plan names it; None: there is none."""
    if node.get("type") == "SET_OPERATION_NODE":
        return "Union" if node.get("setop_type") == "UNION" else "Intersect/Except"
    for modifier in node.get("modifiers") or []:
        return "Distinct" if modifier["type"] == "DISTINCT_MODIFIER" else "Sort/Limit"
    if node.get("from_table", {}).get("type") != "BASE_TABLE":
        return "Join" if node.get("from_table", {}).get("type") == "JOIN" else "Subquery"
    if node.get("group_expressions") or node.get("having"):
        return "Aggregate"

    def first(part: Any) -> str | None:
        if isinstance(part, list):
            return next((r for r in map(first, part) if r), None)
        if not isinstance(part, dict):
            return None
        if part.get("class") == "WINDOW":
            return "Window"
        if part.get("class") == "SUBQUERY":
            return "Subquery"
        if part.get("class") == "FUNCTION" and part.get("function_name") in aggregates:
            return "Aggregate"
        return first(list(part.values()))

    return first([node["select_list"], node.get("where_clause")])


def _column_refs(part: Any) -> set[str]:
    """The columns a parsed expression names."""
    if isinstance(part, list):
        return set().union(*map(_column_refs, part))
    if not isinstance(part, dict):
        return set()
    if part.get("class") == "COLUMN_REF":
        return {part["column_names"][-1]}
    return _column_refs(list(part.values()))


@cache
def _database() -> duckdb.DuckDBPyConnection:
    """This process's one in-memory DuckDB (starting one costs 0.1-0.4 s, a connection to it
    nothing); made on first use, so the fork server never holds one (nor its threads)."""
    return duckdb.connect()


def _connect() -> duckdb.DuckDBPyConnection:
    """A connection of its own (its own registered tables and temporary views) whose zoned
    timestamps come out in UTC, as Spark's do."""
    con = _database().cursor()
    con.execute("SET TimeZone = 'UTC'")
    return con


@cache
def _aggregates() -> frozenset[str]:
    """The names of DuckDB's aggregate functions."""
    con = _connect()
    try:
        return frozenset(name for (name,) in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'"
        ).fetchall())
    finally:
        con.close()


def _duckdb_sql(query: str) -> str:
    return _BACKQUOTED.sub(lambda m: _quote(m.group(1).replace("``", "`")), query)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _difference(after: pa.Table, before: pa.Table) -> pa.Table:
    """The rows of ``after`` not in ``before``, as multisets."""
    if before.num_rows == 0:
        return after
    con = _connect()
    try:
        con.register("after_rows", after)
        con.register("before_rows", before.cast(after.schema))
        return con.sql("SELECT * FROM after_rows EXCEPT ALL SELECT * FROM before_rows").to_arrow_table()
    finally:
        con.close()


def _output(rows: pa.Table, vocab: DatasetVocabulary, system_time: datetime | None = None) -> pa.Table:
    """system_time, the event time, the data columns (sorted), as the Spark engine writes them."""
    event_time, system = vocab.event_time, vocab.system_time
    if event_time not in rows.column_names:
        raise engine_error(EngineErrorKind.INVALID_QUERY,
                           f"the query result has no column `{event_time}` (the output event time "
                           f"column); it has: {', '.join(rows.column_names)}")
    data = [c for c in rows.column_names if c not in (event_time, system)]
    table = rows.select([event_time, *data])
    stamp = pa.repeat(pa.scalar(system_time, SYSTEM_TIME_TYPE), table.num_rows) if system_time \
        else pa.array([], SYSTEM_TIME_TYPE)
    table = table.add_column(0, pa.field(system, SYSTEM_TIME_TYPE), stamp)
    return table.sort_by([(c, "ascending") for c in table.column_names[1:]])


def _ddl(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name} {f.type}" for f in schema)


# ----- state ----------------------------------------------------------------------------------


def _load_state(checkpoint: Path | None) -> dict:
    if checkpoint is None or not (checkpoint / STATE_FILE).exists():
        return {"inputs": {}, "output_watermark": None}
    return json.loads((checkpoint / STATE_FILE).read_text())


def _read(paths: list[str], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in paths]) if paths else schema.empty_table()


def _max_event_time(path: str, column: str) -> datetime | None:
    values = pq.read_table(path, columns=[column]).column(column)
    if not pa.types.is_timestamp(values.type):
        return None  # a DATE event time gives no watermark (as in Spark)
    return pc.max(values).as_py()


def _time(text: str | None) -> datetime | None:
    return parse_timestamp(text) if text else None


def _text(moment: datetime | None) -> str | None:
    return format_timestamp(moment) if moment else None
