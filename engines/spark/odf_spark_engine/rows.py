"""How a transform's output records come from its inputs' records (DeriveRowMapping), read from
Spark's analysed logical plan, planned as DeriveLineage plans it (``lineage.analysed_plan``:
empty batch frames of the inputs' schemas, the same SQL policy, no data read).

The coordinator asks this of a query over an input that holds retractions and corrections
(op != 0): such records can only pass through a plan in which each output record is one input
record, computed from that record alone, so that a retraction of an input record is the
retraction of the output record it made. Any other plan over such an input is recomputed
by the coordinator over the input's current rows instead.

Invariants:
- A plan is row-wise when every operator from the output down to the one input view it reads
  is a projection, a filter or an alias (a subquery alias, a CTE, an earlier step's view),
  and no expression in them holds a subquery (which reads records besides the current one).
  Anything else is named (``operator``), the first met from the output down; the answer is
  never a guess: an operator not listed here is named by Spark's class.
- ``copies`` lists only output columns whose value is an input column unchanged: the column
  itself or an alias of it, through every projection; a cast or any function is not a copy.
- ``filtered`` lists every input column a filter's condition reads, through whatever the
  projections below it computed from them (a filter on ``op + 0`` reads ``op``); ``sources``
  the input columns each output column is computed from, the same way.
"""
from __future__ import annotations

from pyspark.sql import SparkSession

from . import temporal
from .generated import engine_pb2 as pb
from .lineage import _class, _id, _is_subquery, analysed_plan
from .policy import _expressions, _scala

# Operators that keep each record of their child as it is or drop it, one record at a time.
ROW_WISE = {"Project", "Filter", "SubqueryAlias"}
# The names a user knows for the operators that are not (Spark's class names otherwise).
NAMES = {
    "Aggregate": "Aggregate", "Expand": "Expand", "Join": "Join", "LateralJoin": "Join",
    "Window": "Window", "Distinct": "Distinct", "Deduplicate": "Distinct",
    "DeduplicateWithinWatermark": "Distinct", "Sort": "Sort/Limit", "GlobalLimit": "Sort/Limit",
    "LocalLimit": "Sort/Limit", "Offset": "Sort/Limit", "Tail": "Sort/Limit", "Union": "Union",
    "Intersect": "Intersect/Except", "Except": "Intersect/Except", "Generate": "Generate",
}


class _NotRowWise(Exception):
    def __init__(self, operator: str):
        self.operator = operator


class _Walk:
    """Walks a plan from its output down to the one input view, keeping each attribute that
    is an input column unchanged (exprId -> the input column's name), the input columns each
    attribute is computed from, and those the filters read."""

    def __init__(self, inputs: set[str]):
        self.inputs = inputs
        self.input = ""
        self.copies: dict[int, str] = {}
        self.sources: dict[int, frozenset[str]] = {}  # exprId -> the input columns it reads
        self.filtered: set[str] = set()
        self.ctes: dict[int, object] = {}  # CTE id -> its definition's plan

    def plan(self, node) -> None:
        kind = _class(node)
        if kind == "WithCTE":
            for definition in _scala(node.cteDefs()):
                self.ctes[definition.id()] = definition.child()
            self.plan(node.plan())
            return
        if kind == "CTERelationRef":
            definition = self.ctes[node.cteId()]
            self.plan(definition)
            for attr, defined in zip(_scala(node.output()), _scala(definition.output()), strict=True):
                if _id(defined) in self.copies:
                    self.copies[_id(attr)] = self.copies[_id(defined)]
                self.sources[_id(attr)] = self.sources.get(_id(defined), frozenset())
            return
        if kind == "View" and temporal.input_of(node.desc().identifier().table()) in self.inputs:
            self.input = temporal.input_of(node.desc().identifier().table())
            for attr in _scala(node.output()):
                self.copies[_id(attr)] = attr.name()
                self.sources[_id(attr)] = frozenset([attr.name()])
            return
        if kind in ("LocalRelation", "OneRowRelation", "Range"):
            return  # reads no input: VALUES, SELECT without FROM
        if kind not in ROW_WISE and kind != "View":  # a View not an input's: an earlier step
            raise _NotRowWise(NAMES.get(kind, kind))
        if any(_is_subquery(e) for e in _expressions(node)):
            raise _NotRowWise("Subquery")
        [child] = _scala(node.children())
        self.plan(child)
        if kind == "Project":
            for expression in _scala(node.projectList()):
                inner = expression.child() if _class(expression) == "Alias" else expression
                if _class(inner) == "AttributeReference" and _id(inner) in self.copies:
                    self.copies[_id(expression)] = self.copies[_id(inner)]
                self.sources[_id(expression)] = self.read(expression)
        elif kind == "Filter":
            self.filtered |= self.read(node.condition())

    def read(self, expression) -> frozenset[str]:
        """The input columns ``expression`` is computed from."""
        return frozenset().union(*(self.sources.get(_id(a), frozenset())
                                   for a in _scala(expression.references().toSeq())))


def derive(spark: SparkSession, request: pb.LineageRequest) -> pb.RowMapping:
    """The row mapping of ``request.transform`` over inputs of ``request.inputs``' schemas."""
    plan = analysed_plan(spark, request)
    walk = _Walk({i.dataset_id for i in request.inputs})
    try:
        walk.plan(plan)
    except _NotRowWise as refused:
        return pb.RowMapping(operator=refused.operator)
    output = list(_scala(plan.output()))
    copies = {a.name(): walk.copies[_id(a)] for a in output if _id(a) in walk.copies}
    sources = {a.name(): pb.InputColumns(columns=sorted(walk.sources.get(_id(a), ())))
               for a in output}
    return pb.RowMapping(input=walk.input, copies=copies, filtered=sorted(walk.filtered),
                         sources=sources)
