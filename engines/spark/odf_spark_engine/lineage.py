"""Field-level lineage of a transform, read from Spark's analysed logical plan (DeriveLineage).

The steps are planned exactly as ExecuteQuery plans them (``run_steps``: same views, same SQL
policy), over empty batch frames of the inputs' schemas, so no data is read. The analysed plan
is then walked bottom-up: every attribute Spark makes carries a unique ``exprId``, and each one
is mapped to the input columns it comes from, each with how (``kind``) and the expression text
of each step that computed it. Conditions - filter, join, grouping, window keys - are collected
separately: they decide which rows exist, not one column's value. The non-null filter Spark puts
under a time window (``window()`` drops rows without a time) is part of that window: the
window's condition names its column, so it is not recorded as a user's filter too.

Invariants:
- Only plan nodes whose column semantics are known here are walked; any other node is an
  UNSUPPORTED failure naming it. The answer is never a guess.
- Kinds compose along a path by strength: copy < transform < window < aggregate (a column
  copied from an aggregate is an aggregate of the input). An input column reached by several
  paths keeps its strongest use.
- Expression texts are the user's SQL where Spark kept its position (``origin``), otherwise
  Spark's own rendering; along a path they are listed output side first, joined by `` <- ``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from . import temporal
from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb
from .policy import _scala
from .streaming import check_transform, run_steps

CLAUSE = re.compile(r"\s*(SELECT|WITH|FROM|GROUP\s+BY|WHERE|HAVING)\b", re.IGNORECASE)
RANK = {"copy": 0, "transform": 1, "window": 2, "aggregate": 3}
MAX_EXPRESSION = 300
TIME_WINDOW_MARKER = "spark.timeWindow"  # metadata Spark puts on the column window() makes

# Nodes whose output attributes are (a subset of) their first child's, unchanged.
PASS_THROUGH = {
    "SubqueryAlias", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "Distinct",
    "Deduplicate", "DeduplicateWithinWatermark", "Repartition", "RepartitionByExpression",
    "RebalancePartitions", "EventTimeWatermark", "Filter", "Intersect", "Except",
}
# Leaves that read no input: VALUES lists, ranges, SELECT without FROM.
CONSTANT_LEAVES = {"LocalRelation", "OneRowRelation", "Range"}


@dataclass(frozen=True)
class Use:
    kind: str
    expressions: tuple[str, ...] = ()


Origins = dict[tuple[str, str], Use]  # (input, column) -> how


def _stronger(a: Use | None, b: Use) -> Use:
    return b if a is None or RANK[b.kind] > RANK[a.kind] else a


def _merge(into: Origins, more: Origins) -> None:
    for key, use in more.items():
        into[key] = _stronger(into.get(key), use)


def _through(origins: Origins, kind: str, expression: str | None) -> Origins:
    """``origins`` seen through one more step of ``kind`` (``expression`` when it computes)."""
    out: Origins = {}
    for key, use in origins.items():
        composed = use.kind if RANK[use.kind] >= RANK[kind] else kind
        texts = ((expression,) if expression else ()) + use.expressions
        out[key] = Use(composed, texts)
    return out


@dataclass
class _Walk:
    inputs: set[str]
    origins: dict[int, Origins] = field(default_factory=dict)  # exprId -> where it comes from
    conditions: dict[tuple[str, str, str], str] = field(default_factory=dict)
    ctes: dict[int, list] = field(default_factory=dict)  # CTE id -> its definition's output

    # ----- operators --------------------------------------------------------------------

    def plan(self, node) -> None:
        kind = _class(node)
        if kind == "WithCTE":
            for definition in _scala(node.cteDefs()):
                self.plan(definition.child())
                self.ctes[definition.id()] = list(_scala(definition.child().output()))
            self.plan(node.plan())
            return
        if kind == "View" and temporal.input_of(node.desc().identifier().table()) in self.inputs:
            name = temporal.input_of(node.desc().identifier().table())
            for attr in _scala(node.output()):
                self.origins[_id(attr)] = {(name, attr.name()): Use("copy")}
            return
        if kind in CONSTANT_LEAVES:
            for attr in _scala(node.output()):
                self.origins[_id(attr)] = {}
            return
        if kind == "CTERelationRef":
            for attr, defined in zip(_scala(node.output()), self.ctes[node.cteId()], strict=True):
                self.origins[_id(attr)] = dict(self.origins[_id(defined)])
            return
        if kind not in PASS_THROUGH and kind not in OPERATORS and kind != "View":
            raise EngineFailure(
                Kind.UNSUPPORTED,
                f"field lineage: the query's plan has a {kind} operator, which the engine "
                "cannot trace column by column",
            )
        if kind == "Project" and _windows_own_filter(node):
            self.plan(node.child().child())  # the window's condition covers the filter's
            self.project(node)
            return
        for child in _scala(node.children()):
            self.plan(child)
        if kind in OPERATORS:
            OPERATORS[kind](self, node)
        elif kind == "Filter":
            self.condition(node.condition(), "filter")

    def project(self, node) -> None:
        for expression in _scala(node.projectList()):
            self.named(expression)

    def aggregate(self, node) -> None:
        for key in _scala(node.groupingExpressions()):
            windowed = any(TIME_WINDOW_MARKER in _metadata(a) for a in _attributes(key))
            self.condition(key, "window" if windowed else "groupBy")
        for expression in _scala(node.aggregateExpressions()):
            self.named(expression)

    def join(self, node) -> None:
        if node.condition().isDefined():
            self.condition(node.condition().get(), "join")

    def window(self, node) -> None:
        for expression in _scala(node.windowExpressions()):
            self.named(expression)

    def generate(self, node) -> None:
        generator = node.generator()
        origins = _through(self.refs(generator, "transform"), "transform", _text(generator))
        for attr in _scala(node.generatorOutput()):
            self.origins[_id(attr)] = origins

    def expand(self, node) -> None:
        outputs = list(_scala(node.output()))
        merged: list[Origins] = [{} for _ in outputs]
        for projection in _scala(node.projections()):
            for i, expression in enumerate(_scala(projection)):
                _merge(merged[i], self.value(expression))
        for attr, origins in zip(outputs, merged, strict=True):
            self.origins[_id(attr)] = origins

    def union(self, node) -> None:
        children = [list(_scala(child.output())) for child in _scala(node.children())]
        for i, attr in enumerate(_scala(node.output())):
            merged: Origins = {}
            for columns in children:
                _merge(merged, self.origins[_id(columns[i])])
            self.origins[_id(attr)] = merged

    # ----- expressions ------------------------------------------------------------------

    def named(self, expression) -> None:
        """An output column of a Project, Aggregate or Window."""
        self.origins[_id(expression)] = self.value(expression)

    def value(self, expression) -> Origins:
        """Where the value of ``expression`` comes from, this step's use composed in."""
        inner = expression.child() if _class(expression) == "Alias" else expression
        if _class(inner) in ("AttributeReference", "OuterReference"):
            return dict(self.refs(inner, "copy"))
        if TIME_WINDOW_MARKER in _metadata(expression):
            # Spark rewrote window(...) into arithmetic placed at the GROUP BY clause
            origins = self.refs(inner, "window")
            text = "window(" + ", ".join(sorted({c for _, c in origins})) + ")"
            return _through(origins, "window", text)
        return _through(self.refs(inner, "transform"), "transform", _text(inner))

    def refs(self, expression, kind: str) -> Origins:
        """The origins of the attributes ``expression`` reads, each used as ``kind`` at least
        (aggregate inside an aggregate function, window inside a window specification)."""
        found: Origins = {}
        cls = _class(expression)
        if cls == "AttributeReference":
            key = _id(expression)
            if key not in self.origins:
                raise EngineFailure(
                    Kind.UNSUPPORTED,
                    f"field lineage: column {expression.name()} comes from an operator the engine "
                    "cannot trace",
                )
            return _through(self.origins[key], kind, None)
        if cls == "WindowExpression":
            _merge(found, self.refs(expression.windowFunction(), "aggregate"))
            _merge(found, self.refs(expression.windowSpec(), "window"))
            return found
        if cls == "AggregateExpression":
            kind = "aggregate"
        if _is_subquery(expression):
            self.plan(expression.plan())
            for attr in _scala(expression.plan().output()):
                _merge(found, _through(self.origins[_id(attr)], kind, None))
        for child in _scala(expression.children()):
            _merge(found, self.refs(child, kind))
        return found

    def condition(self, expression, kind: str) -> None:
        text = expression.name() if _class(expression) == "AttributeReference" else _text(expression)
        for (name, column) in self.refs(expression, "transform"):
            self.conditions.setdefault((name, column, kind), text)


OPERATORS = {
    "Project": _Walk.project, "Aggregate": _Walk.aggregate, "Join": _Walk.join,
    "Window": _Walk.window, "Generate": _Walk.generate, "Expand": _Walk.expand,
    "Union": _Walk.union,
}


# ----- the request ---------------------------------------------------------------------------


def analysed_plan(spark: SparkSession, request: pb.LineageRequest):
    """The analysed plan of ``request.transform`` planned as ExecuteQuery plans it (same views,
    same SQL policy) over empty batch frames of ``request.inputs``' schemas: no data read."""
    check_transform(request.transform)
    session = spark.newSession()
    tables = temporal.Tables.of(request.transform, request.inputs)
    frames = {}
    for schema_message in request.inputs:
        schema = pa.ipc.read_schema(pa.py_buffer(schema_message.arrow_schema))
        if schema_message.dataset_id in tables.keys:  # its view: the validity interval too
            schema = temporal.view_schema(schema)
        frames[schema_message.dataset_id] = session.createDataFrame([], from_arrow_schema(schema))
    output = run_steps(session, frames, request.transform, tables)
    return output._jdf.queryExecution().analyzed()


def derive(spark: SparkSession, request: pb.LineageRequest) -> pb.FieldLineageResult:
    """The field lineage of ``request.transform`` over inputs of ``request.inputs``' schemas."""
    plan = analysed_plan(spark, request)
    walk = _Walk({i.dataset_id for i in request.inputs})
    walk.plan(plan)
    event_time = request.vocab.event_time_column or "event_time"
    system_time = request.vocab.system_time_column or "system_time"
    columns = [a for a in _scala(plan.output()) if a.name() != system_time]
    columns.sort(key=lambda a: a.name() != event_time)  # the output's order: event time first
    result = pb.FieldLineageResult()
    for attr in columns:
        origin = result.fields.add(field=attr.name())
        for (name, column), use in sorted(walk.origins[_id(attr)].items()):
            origin.sources.add(input=name, field=column, kind=use.kind,
                               expression=_join(use.expressions))
    for (name, column, kind), text in sorted(walk.conditions.items()):
        if column in temporal.HIDDEN:  # the temporal join's interval: the AS OF column stays
            continue
        result.conditions.add(input=name, field=column, kind=kind, expression=text)
    return result


# ----- py4j helpers ---------------------------------------------------------------------------


def _class(node) -> str:
    return node.getClass().getSimpleName().rstrip("$")


def _id(attr) -> int:
    return attr.exprId().id()


def _metadata(expression) -> str:
    try:
        return expression.metadata().json()
    except Exception:  # an expression that is not a named one has no metadata
        return ""


def _attributes(expression) -> list:
    return list(_scala(expression.references().toSeq()))


def _windows_own_filter(project) -> bool:
    """Is ``project`` the one Spark adds for a time window (it carries the window marker) over
    the ``IS NOT NULL`` filter of the window's time column Spark adds with it?"""
    child = project.child()
    if _class(child) != "Filter" or _class(child.condition()) != "IsNotNull":
        return False
    windows = [e for e in _scala(project.projectList()) if TIME_WINDOW_MARKER in _metadata(e)]
    read = {_id(a) for e in windows for a in _attributes(e)}
    return bool(windows) and all(_id(a) in read for a in _attributes(child.condition()))


def _is_subquery(expression) -> bool:
    cls = expression.getClass()
    while cls is not None:
        if cls.getSimpleName() == "SubqueryExpression":
            return True
        cls = cls.getSuperclass()
    return False


def _text(expression) -> str:
    """The user's SQL for ``expression`` where Spark kept its place, else Spark's rendering.
    Expressions Spark adds itself (casts, rewrites) carry the place of a whole query or clause:
    those are rendered by Spark."""
    origin = expression.origin()
    text = ""
    if origin.sqlText().isDefined() and origin.startIndex().isDefined() and origin.stopIndex().isDefined():
        text = origin.sqlText().get()[origin.startIndex().get(): origin.stopIndex().get() + 1]
    if not text or CLAUSE.match(text):
        text = expression.sql()
    return text if len(text) <= MAX_EXPRESSION else text[: MAX_EXPRESSION - 3] + "..."


def _join(expressions: tuple[str, ...]) -> str:
    return " <- ".join(dict.fromkeys(expressions))
