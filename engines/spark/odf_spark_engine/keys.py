"""The output columns that identify a row of a query's result, read from its analysed plan.

A derivative recomputed as a batch writes the difference between its rows before and after;
a row whose identity stays while its values change (a group's new count) is written as a
correct-from / correct-to pair, as the reference writes an update, when the coordinator knows
which columns are that identity. Only one plan shape has one the engine can name: an
aggregation at the top of the query (under sorts, filters, aliases and projections), whose
rows are one per group. Its key columns are the output columns computed from the grouping
keys alone; a time window's bounds count, as the window is a grouping key.

Invariants:
- The key is given only when the output columns computed from grouping keys alone read every
  grouping key between them (so two groups cannot share them); otherwise, and for any other
  plan (joins, unions, window functions, a plain projection), there is none.
- The key decides only how a change is written, never which rows the result holds: whatever
  the key, the coordinator's records fold to the same rows (ODF's rule).
"""
from __future__ import annotations

from .policy import _class, _scala

# Nodes an aggregation's rows pass through to the output, one to one or fewer.
ABOVE = {"Project", "Filter", "Sort", "SubqueryAlias", "View", "GlobalLimit", "LocalLimit"}


def output_key(plan) -> list[str]:
    """The names of ``plan``'s (an analysed logical plan's) key columns; [] when it has none."""
    projections = []
    node = plan
    while _class(node) in ABOVE:
        if _class(node) == "Project":
            projections.append(node)
        node = node.child()
    if _class(node) != "Aggregate":
        return []
    grouping = {_id(a) for e in _scala(node.groupingExpressions()) for a in _references(e)}
    keys = _keys(_scala(node.aggregateExpressions()), grouping)
    for project in reversed(projections):  # from the aggregation up to the output
        if not keys:
            return []
        keys = _keys(_scala(project.projectList()), keys)
    return [a.name() for a in _scala(plan.output()) if _id(a) in keys]


def _keys(outputs, identity: set[int]) -> set[int]:
    """Of ``outputs`` (named expressions over rows identified by ``identity``'s attributes),
    those computed from ``identity`` alone; empty unless together they read all of it."""
    keys, read = set(), set()
    for expression in outputs:
        refs = {_id(a) for a in _references(expression)}
        if refs and refs <= identity and not _aggregates(expression):
            keys.add(_id(expression))
            read |= refs
    return keys if read == identity else set()


def _aggregates(expression) -> bool:
    if _class(expression) == "AggregateExpression":
        return True
    return any(_aggregates(child) for child in _scala(expression.children()))


def _references(expression) -> list:
    return list(_scala(expression.references().toSeq()))


def _id(attr) -> int:
    return attr.exprId().id()
