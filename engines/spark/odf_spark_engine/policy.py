"""The SQL policy: what a transform's query may do, checked on Spark's own plans, never on text.

A query is code from someone else as often as not (a manifest copied from a catalogue, a
pulled dataset that ``verify`` replays), and its result must be reproducible from its inputs
alone. Each step is checked twice:

1. Its *parsed* plan, before Spark analyses it (analysis runs commands, reads files to infer
   their schema and evaluates table-valued function arguments):
   - every operator is a query operator (PARSED_OPERATORS): no command or statement (SET,
     ADD JAR, CREATE FUNCTION, USE, CACHE, INSERT, EXECUTE IMMEDIATE, CALL ...), no
     ``TRANSFORM ... USING`` script, no ``TABLESAMPLE``;
   - every relation is a declared input, an earlier step or a CTE of the query, named by one
     identifier: no path relation (``text.`/a/file```), no catalog table;
   - table-valued functions are only the generators (TABLE_FUNCTIONS);
   - no function of DENIED_FUNCTIONS is called.
2. Its *analysed* plan:
   - every leaf reads a declared input (the same source as one of the input views), or is a
     VALUES list, a one-row or a ``range`` relation;
   - no expression is one of DENIED_FUNCTIONS (this catches the ones written without
     parentheses, ``current_date``, ``user``) or is marked non-deterministic by Spark.

Variable substitution (``${env:NAME}``, ``${system:user.home}``, ``${spark.app.id}``) is off in
every session a query runs in: it would put the machine's values into the SQL text itself.

A refusal is an EngineFailure of kind FORBIDDEN, one line naming the step and the function,
relation or statement. The README's "Allowed SQL" section says the same for users.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from py4j.java_gateway import is_instance_of
from pyspark.sql import DataFrame, SparkSession

from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb

# Functions whose result depends on something other than the inputs: the moment, the session,
# the machine, where a row was read from, chance, or Java code. Spark marks only some of them
# non-deterministic. Lower-case names, as written in SQL (aliases included).
DENIED_FUNCTIONS = {
    **dict.fromkeys(["java_method", "reflect", "try_reflect"], "calls Java code"),
    **dict.fromkeys([
        "current_timestamp", "now", "localtimestamp", "current_date", "curdate", "current_time",
        "current_timezone",
    ], "depends on the moment the query runs"),
    **dict.fromkeys([
        "current_user", "user", "session_user", "current_database", "current_schema",
        "current_catalog", "version",
    ], "depends on the session or the engine"),
    **dict.fromkeys([
        "input_file_name", "input_file_block_start", "input_file_block_length",
        "spark_partition_id", "monotonically_increasing_id",
    ], "depends on how the input was read"),
    **dict.fromkeys(["rand", "random", "randn", "randstr", "uniform", "uuid", "shuffle"],
                    "is random"),
}
# (unix_timestamp() without arguments is the current time: the analysed plan shows it as
# current_timestamp(), refused there; with arguments it only converts them.)

# Table-valued functions that only generate rows from their arguments.
TABLE_FUNCTIONS = {
    "range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline",
    "inline_outer", "stack", "json_tuple", "variant_explode", "variant_explode_outer",
}

# The operators a parsed query is made of (class names in org.apache.spark.sql.catalyst).
# Anything else, commands and statements first, is refused before Spark analyses it.
PARSED_OPERATORS = {
    "Project", "Filter", "Aggregate", "Join", "LateralJoin", "Union", "Intersect", "Except",
    "Distinct", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "SubqueryAlias",
    "UnresolvedWith", "UnresolvedRelation", "UnresolvedTableValuedFunction",
    "UnresolvedTVFAliases", "UnresolvedSubqueryColumnAliases", "UnresolvedInlineTable",
    "OneRowRelation", "LocalRelation", "Generate", "Window", "WithWindowDefinition", "Pivot",
    "Unpivot", "RepartitionByExpression", "Repartition", "RebalancePartitions",
    "UnresolvedHint", "NamedStreamingRelation", "Deduplicate", "UnresolvedHaving",
}
# Leaves of an analysed plan that read nothing (a CTE reference reads its definition, which
# is in the same plan and checked as such).
SAFE_LEAVES = {"OneRowRelation", "LocalRelation", "Range", "CTERelationRef"}

# Data source names Spark accepts as `format`.`path` relations, for a clearer message.
PATH_FORMATS = {"text", "csv", "json", "parquet", "orc", "avro", "binaryfile", "xml", "delta"}


@dataclass(frozen=True)
class Step:
    index: int
    alias: str  # "" for the output step

    def refuse(self, what: str) -> EngineFailure:
        name = f"step {self.index}" + (f" ({self.alias})" if self.alias else " (the output)")
        return EngineFailure(
            Kind.FORBIDDEN,
            f"{name}: {what}; see the README's \"Allowed SQL\"",
            pb.SourcePosition(step=self.index, alias=self.alias, column=-1),
        )


class Policy:
    """The policy for one transform's steps in ``session``, whose input views are ``inputs``
    (view name -> frame). Call ``check_statement`` before ``session.sql`` and ``check_plan``
    on its result; ``add_step`` makes a step's alias a relation the later steps may read."""

    def __init__(self, session: SparkSession, inputs: dict[str, DataFrame]):
        session.conf.set("spark.sql.variable.substitute", "false")
        self._session = session
        self._walker = _Walker(session)
        self._relations = set(inputs)
        self._inputs = {name: _analysed(frame) for name, frame in inputs.items()}
        self._steps: set[str] = set()  # aliases of the steps already checked

    def add_step(self, alias: str) -> None:
        self._relations.add(alias)
        self._steps.add(alias)

    def check_statement(self, sql: str, step: Step) -> None:
        """The parsed plan (raises Spark's ParseException for text that is not SQL)."""
        parsed = self._session._jsparkSession.sessionState().sqlParser().parsePlan(sql)
        nodes = [node for node, _ in self._walker.nodes(parsed)]
        ctes = {name for node in nodes if _class(node) == "UnresolvedWith"
                for name in _cte_names(node)}
        for node in nodes:
            kind = _class(node)
            if kind not in PARSED_OPERATORS:
                raise step.refuse(f"{_statement(node)} is not allowed (a step is one query over its inputs)")
            if kind == "UnresolvedRelation":
                self._check_relation(list(_scala(node.multipartIdentifier())), ctes, step)
            elif kind == "UnresolvedTableValuedFunction":
                name = ".".join(_scala(node.name())).lower()
                if name not in TABLE_FUNCTIONS:
                    raise step.refuse(f"table function {name}() is not allowed: read the declared inputs")
            for expression in _expressions(node):
                if _class(expression) == "UnresolvedFunction":
                    name = list(_scala(expression.nameParts()))[-1].lower()
                    if name in DENIED_FUNCTIONS:
                        raise step.refuse(f"function {name}() is not allowed: it {DENIED_FUNCTIONS[name]}")

    def check_plan(self, frame: DataFrame, step: Step) -> None:
        """The analysed plan: what the leaves read and what the expressions compute. The
        engine's input views (their marker filter is not the user's) and the views of earlier
        steps (checked when they were planned) are not entered."""
        for node, checked in self._walker.nodes(_analysed(frame), self._checked):
            if checked:
                continue
            if node.children().isEmpty() and _class(node) not in SAFE_LEAVES:
                raise step.refuse(f"relation {_describe(node)} is not allowed: read the declared inputs")
            for expression in _expressions(node):
                name = expression.prettyName().lower()
                if name in DENIED_FUNCTIONS:
                    raise step.refuse(f"function {name}() is not allowed: it {DENIED_FUNCTIONS[name]}")
                if not expression.deterministic() and all(
                    child.deterministic() for child in _scala(expression.children())
                ):
                    raise step.refuse(
                        f"function {name}() is not allowed: Spark marks it non-deterministic, "
                        "so verify could not reproduce the result"
                    )

    def _checked(self, node) -> bool:
        """An input view as the engine made it, or the view of an earlier step (a query cannot
        make a View node itself: the only views are the ones the engine registers)."""
        if _class(node) != "View":
            return False
        name = node.desc().identifier().table()
        if name in self._steps:
            return True
        plan = self._inputs.get(name)
        return plan is not None and node.sameResult(plan)

    def _check_relation(self, parts: list[str], ctes: set[str], step: Step) -> None:
        if len(parts) == 1 and (parts[0] in self._relations or parts[0] in ctes):
            return
        name = ".".join(f"`{p}`" if not p.isidentifier() else p for p in parts)
        if len(parts) == 2 and parts[0].lower() in PATH_FORMATS:
            raise step.refuse(f"path relation {name} is not allowed: read the declared inputs")
        hint = ""
        if ".".join(parts) in self._relations:
            hint = f" (to read the input {'.'.join(parts)}, quote its name: `{'.'.join(parts)}`)"
        known = ", ".join(sorted(self._relations))
        raise step.refuse(f"relation {name} is not a declared input or an earlier step ({known}){hint}")


# ----- walking Spark's trees through py4j ----------------------------------------------------

LOGICAL_PLAN = "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan"


def _analysed(frame: DataFrame):
    return frame._jdf.queryExecution().analyzed()


def _scala(seq) -> Iterator:
    iterator = seq.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _class(node) -> str:
    return node.getClass().getSimpleName().rstrip("$")


class _Walker:
    """Walks the operators of a plan: children, subqueries and CTE definitions included."""

    def __init__(self, session: SparkSession):
        self._gateway = session.sparkContext._gateway

    def nodes(self, plan, opaque: Callable[[Any], bool] = lambda node: False) -> Iterator[tuple[Any, bool]]:
        """Every operator of ``plan`` and whether it is ``opaque`` (yielded, not entered)."""
        closed = opaque(plan)
        yield plan, closed
        if closed:
            return
        for child in _scala(plan.children()):  # operators' children are operators
            yield from self.nodes(child, opaque)
        inner = plan.innerChildren()
        if not inner.isEmpty():  # subquery plans, CTE definitions (or expressions)
            for child in _scala(inner):
                if is_instance_of(self._gateway, child, LOGICAL_PLAN):
                    yield from self.nodes(child, opaque)


def _expressions(node) -> Iterator:
    """Every expression of one operator, nested ones included (subquery plans are operators)."""
    pending = list(_scala(node.expressions()))
    while pending:
        expression = pending.pop()
        yield expression
        pending += _scala(expression.children())


def _cte_names(node) -> Iterator[str]:
    for definition in _scala(node.cteRelations()):
        yield definition._1()


def _statement(node) -> str:
    """A refused operator, named for the user: the SQL keyword where the class says it."""
    kind = _class(node)
    words = {
        "SetCommand": "SET", "ResetCommand": "RESET", "AddJarsCommand": "ADD JAR",
        "AddFilesCommand": "ADD FILE", "AddArchivesCommand": "ADD ARCHIVE",
        "CreateFunction": "CREATE FUNCTION", "CreateFunctionCommand": "CREATE FUNCTION",
        "ScriptTransformation": "TRANSFORM ... USING", "Sample": "TABLESAMPLE",
        "InsertIntoStatement": "INSERT", "InsertIntoDir": "INSERT OVERWRITE DIRECTORY",
        "UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE", "Call": "CALL",
        "SetCatalogAndNamespace": "USE", "CacheTable": "CACHE TABLE",
        "CreateView": "CREATE VIEW", "CreateViewCommand": "CREATE VIEW",
        "PlanWithUnresolvedIdentifier": "IDENTIFIER() of a computed name",
    }
    return words.get(kind, kind)


def _describe(leaf) -> str:
    """A relation of the analysed plan, for the message: its files or its table."""
    text = leaf.simpleString(2).strip()
    return text if len(text) <= 120 else text[:117] + "..."
