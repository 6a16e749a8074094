"""The SQL policy: what a transform's query may do, checked on Spark's own plans (and, for
typed literals, Spark's own tokens), never on patterns of text.

A query is code from someone else as often as not (a manifest copied from a catalogue, a
pulled dataset that ``verify`` replays), and its result must be reproducible from its inputs
alone. Each step is checked twice:

1. Its *parsed* plan, before Spark analyses it (analysis runs commands, reads files to infer
   their schema and evaluates table-valued function arguments):
   - every operator is a query operator (PARSED_OPERATORS): no command or statement (SET,
     ADD JAR, CREATE FUNCTION, USE, CACHE, INSERT, EXECUTE IMMEDIATE, CALL ...), no
     ``TRANSFORM ... USING`` script, no ``TABLESAMPLE``;
   - every relation is a declared input, an earlier step or a CTE of the query, named by one
     identifier: no path relation (``text.`/a/file```), no catalog table; a temporal table
     (temporal.py) is no relation of its own: its joins read it by a private view name;
   - table-valued functions are only the generators (TABLE_FUNCTIONS);
   - no function of DENIED_FUNCTIONS is called;
   - no typed literal is a special datetime value (``TIMESTAMP 'now'``, ``DATE 'today'``):
     the parser replaces them by the current time as it builds the plan (and evaluates VALUES
     lists of them), so they are looked for in the tokens Spark's parser reads.
2. Its *analysed* plan:
   - every leaf reads a declared input (the same source as one of the input views), or is a
     VALUES list, a one-row or a ``range`` relation;
   - a temporal table's private view is only the right side of an inner or left join whose
     validity interval compares it with the event time column of a streamed input, that
     column itself (through renames only), not a value computed from it or the table's own;
   - no expression is one of DENIED_FUNCTIONS (this catches the ones written without
     parentheses, ``current_date``, ``user``) or is marked non-deterministic by Spark;
   - ``aes_encrypt`` has a constant IV (or the ECB mode, which takes none): without one it
     draws a random IV;
   - no constant string becomes a special datetime value: Spark's optimizer (rule
     SpecialDatetimeValues, after ReplaceExpressions) turns a cast of a *foldable* string
     that DateTimeUtils reads as ``now``, ``today``, ``yesterday`` or ``tomorrow`` into the
     current time; explicit casts, ``try_cast``, ``to_timestamp``/``to_date``/... and the
     implicit casts of string arguments are all such casts. The policy evaluates the same
     strings and asks Spark's own DateTimeUtils. ``epoch`` is a constant and stays allowed;
     a string from the data is never special (it is not foldable).

Variable substitution (``${env:NAME}``, ``${system:user.home}``, ``${spark.app.id}``) is off in
every session a query runs in: it would put the machine's values into the SQL text itself.

A refusal is an EngineFailure of kind FORBIDDEN, one line naming the step and the function,
relation, statement or special value. The README's "Allowed SQL" section says the same for users.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from py4j.java_gateway import is_instance_of
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from . import temporal
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
        "current_catalog", "current_path", "version",
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

# What Spark's special datetime values stand for ('epoch', a constant, is allowed). A value
# Spark reads as special that is not listed here is refused all the same.
SPECIAL_DATETIMES = {
    "now": "the moment the query runs",
    "today": "the day the query runs",
    "yesterday": "the day before the query runs",
    "tomorrow": "the day after the query runs",
}
# Spark's readers of special values (DateTimeUtils), by the type a string becomes.
SPECIAL_DATETIME_READERS = {
    "date": "convertSpecialDate",
    "timestamp": "convertSpecialTimestamp",
    "timestamp_ntz": "convertSpecialTimestampNTZ",
}

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
        return self.failure(Kind.FORBIDDEN, f"{what}; see the README's \"Allowed SQL\"")

    def invalid(self, what: str) -> EngineFailure:
        """A query this engine cannot run as written (not a policy refusal)."""
        return self.failure(Kind.INVALID_QUERY, what)

    def failure(self, kind: int, what: str) -> EngineFailure:
        name = f"step {self.index}" + (f" ({self.alias})" if self.alias else " (the output)")
        position = pb.SourcePosition(step=self.index, alias=self.alias, column=-1)
        return EngineFailure(kind, f"{name}: {what}", position)


class Policy:
    """The policy for one transform's steps in ``session``, whose input views are ``inputs``
    (view name -> frame; a temporal table of ``tables`` by its private view name). Call
    ``check_statement`` before ``session.sql`` and ``check_plan`` on its result; ``add_step``
    makes a step's alias a relation the later steps may read."""

    def __init__(self, session: SparkSession, inputs: dict[str, DataFrame],
                 tables: temporal.Tables = temporal.NONE):
        session.conf.set("spark.sql.variable.substitute", "false")
        self._session = session
        self._walker = _Walker(session)
        self._clock = _SpecialDatetimes(session)
        self._tables = tables
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
        if (special := self._clock.in_typed_literals(sql)) is not None:
            raise step.refuse(_special_refusal(special))

    def check_plan(self, frame: DataFrame, step: Step) -> None:
        """The analysed plan: what the leaves read and what the expressions compute. The
        engine's input views (their marker filter is not the user's) and the views of earlier
        steps (checked when they were planned) are not entered."""
        plan = _analysed(frame)
        _TemporalJoins(self._tables, self._walker, self._checked, step).check(plan)
        for node, checked in self._walker.nodes(plan, self._checked):
            if checked:
                continue
            if node.children().isEmpty() and _class(node) not in SAFE_LEAVES:
                raise step.refuse(f"relation {_describe(node)} is not allowed: read the declared inputs")
            expressions = list(_expressions(node))
            for expression in expressions:
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
            # Constants are evaluated only once the operator has passed the checks above.
            for expression in expressions:
                if _class(expression) == "AesEncrypt" and _draws_random_iv(expression):
                    raise step.refuse(
                        "function aes_encrypt() is not allowed without a constant IV (its fifth "
                        "argument): it would draw a random one"
                    )
            if (special := self._clock.in_casts(node)) is not None:
                raise step.refuse(_special_refusal(special))

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
        if (table := ".".join(parts)) in self._tables.keys:
            raise step.refuse(f"temporal table {table} is read only as of each event's time: "
                              f"JOIN `{table}` FOR SYSTEM_TIME AS OF <the streamed input's event time "
                              "column> AS alias ON ...")
        if len(parts) == 2 and parts[0].lower() in PATH_FORMATS:
            raise step.refuse(f"path relation {name} is not allowed: read the declared inputs")
        hint = ""
        if ".".join(parts) in self._relations:
            hint = f" (to read the input {'.'.join(parts)}, quote its name: `{'.'.join(parts)}`)"
        known = ", ".join(sorted({temporal.input_of(r) for r in self._relations}))
        raise step.refuse(f"relation {name} is not a declared input or an earlier step ({known}){hint}")


# ----- temporal joins ------------------------------------------------------------------------

# Nodes whose output attribute (same exprId) is one of their children's, unchanged.
_SAME_ROWS_OR_FEWER = {"Project", "Aggregate"}


class _TemporalJoins:
    """Each temporal table's private view in an analysed plan is the right side of an inner or
    left join, and the ``AS OF`` column of that join's validity interval (temporal.py writes it
    first in the condition) is a streamed input's event time column, through renames only."""

    def __init__(self, tables: temporal.Tables, walker: _Walker, checked: Callable[[Any], bool], step: Step):
        self._tables, self._walker, self._checked, self._step = tables, walker, checked, step
        self._private = {view: name for name, view in tables.views.items()}
        self._ctes: dict[int, Any] = {}  # CTE id -> its definition's plan

    def check(self, plan) -> None:
        if not self._private:
            return
        views = joins = 0
        for node, _ in self._walker.nodes(plan, self._checked):
            kind = _class(node)
            if kind == "WithCTE":
                self._ctes.update((d.id(), d.child()) for d in _scala(node.cteDefs()))
            if kind == "View" and node.desc().identifier().table() in self._private:
                views += 1
            elif kind == "Join" and (table := self._table(node.right())) is not None:
                self._check_join(node, table)
                joins += 1
        if views != joins:  # the rewrite only writes the private names as a join's right side
            raise self._step.refuse("a temporal table is read only as of each event's time "
                                    "(JOIN ... FOR SYSTEM_TIME AS OF <event time> ...)")

    def _table(self, node) -> str | None:
        while _class(node) == "SubqueryAlias":
            node = node.child()
        if _class(node) == "View":
            return self._private.get(node.desc().identifier().table())
        return None

    def _check_join(self, join, table: str) -> None:
        if join.joinType().toString() not in ("Inner", "LeftOuter"):
            raise self._step.invalid(f"temporal table {table}: a temporal join is an inner or left join")
        time = self._as_of(join)
        if time is None or not self._is_event_time(join.left(), time):
            text = "a time that is not a column" if time is None else _user_text(time)
            columns = ", ".join(sorted(set(self._tables.event_times.values())))
            raise self._step.refuse(
                f"temporal table {table} joined AS OF {text}: join it as of the event time column of "
                f"a streamed input ({columns}), so that each event meets the versions in force at its time")

    def _as_of(self, join):
        """The ``AS OF`` attribute of the join's validity interval (None if it is no attribute)."""
        if not join.condition().isDefined():
            return None
        interval = join.condition().get()
        if _class(interval) == "And" and _class(interval.left()) == "And":
            interval = interval.left()  # (interval) AND (the user's condition)
        if _class(interval) != "And" or _class(interval.left()) != "GreaterThanOrEqual":
            return None
        time = interval.left().left()  # (time >= valid_from) AND (...)
        # temporal.py casts the AS OF column to the interval's timestamps
        if _class(time) == "Cast" and _class(time.child()) == "AttributeReference":
            time = time.child()
        return time if _class(time) == "AttributeReference" else None

    def _is_event_time(self, node, attribute) -> bool:
        """Whether ``attribute`` of ``node``'s output is a streamed input's event time column."""
        kind, wanted = _class(node), attribute.exprId().id()
        if kind == "View":
            name = node.desc().identifier().table()
            if name in self._tables.event_times:
                return (any(a.exprId().id() == wanted for a in _scala(node.output()))
                        and attribute.name() == self._tables.event_times[name])
            return name not in self._private and self._is_event_time(node.child(), attribute)
        if kind in _SAME_ROWS_OR_FEWER:
            listed = node.projectList() if kind == "Project" else node.aggregateExpressions()
            for named in _scala(listed):
                if named.exprId().id() == wanted:
                    inner = named.child() if _class(named) == "Alias" else named
                    return _class(inner) == "AttributeReference" and self._from_children(node, inner)
            return False
        if kind in ("Union", "CTERelationRef"):  # the column at the same place in every branch
            place = [a.exprId().id() for a in _scala(node.output())].index(wanted)
            branches = [self._ctes[node.cteId()]] if kind == "CTERelationRef" else _scala(node.children())
            return all(self._is_event_time(branch, list(_scala(branch.output()))[place])
                       for branch in branches)
        return self._from_children(node, attribute)

    def _from_children(self, node, attribute) -> bool:
        wanted = attribute.exprId().id()
        for child in _scala(node.children()):
            if any(a.exprId().id() == wanted for a in _scala(child.output())):
                return self._is_event_time(child, attribute)
        return False


def _user_text(expression) -> str:
    """The SQL the user wrote for ``expression`` (Spark keeps its place in the step)."""
    origin = expression.origin()
    if origin.sqlText().isDefined() and origin.startIndex().isDefined() and origin.stopIndex().isDefined():
        return origin.sqlText().get()[origin.startIndex().get(): origin.stopIndex().get() + 1]
    return expression.sql()


# ----- constants that are not constant ------------------------------------------------------

STRING_TYPE = "org.apache.spark.sql.types.StringType"


class _SpecialDatetimes:
    """Finds Spark's special datetime values where Spark would take them from the clock."""

    def __init__(self, session: SparkSession):
        self._gateway = session.sparkContext._gateway
        jvm = session.sparkContext._jvm
        self._readers = jvm.org.apache.spark.sql.catalyst.util.DateTimeUtils
        self._zone = self._readers.getZoneId(session.conf.get("spark.sql.session.timeZone"))
        self._parser = session._jsparkSession.sessionState().sqlParser()
        self._replace_expressions = jvm.org.apache.spark.sql.catalyst.optimizer.ReplaceExpressions
        self._antlr = jvm.org.antlr.v4.runtime
        self._spark_parser = jvm.org.apache.spark.sql.catalyst.parser
        tokens = self._spark_parser.SqlBaseLexer  # the token types
        self._literal_types = {tokens.DATE: "date", tokens.TIMESTAMP: "timestamp",
                               tokens.TIMESTAMP_LTZ: "timestamp", tokens.TIMESTAMP_NTZ: "timestamp_ntz"}
        self._string_types = {tokens.STRING_LITERAL, tokens.DOUBLEQUOTED_STRING}
        self._parsed_channel = self._antlr.Token.DEFAULT_CHANNEL  # others: spaces, comments
        self._keywords = jvm.java.util.HashSet()
        for token_type in self._literal_types:
            self._keywords.add(token_type)

    def in_typed_literals(self, sql: str) -> str | None:
        """The first special value written as a typed literal: a date or timestamp keyword then
        a string, in the tokens Spark's parser reads (comments and strings are single tokens)."""
        chars = self._spark_parser.UpperCaseCharStream(self._antlr.CharStreams.fromString(sql))
        lexer = self._spark_parser.SqlBaseLexer(chars)
        lexer.removeErrorListeners()  # the statement parsed already
        tokens = self._antlr.CommonTokenStream(lexer)
        tokens.fill()
        for keyword in tokens.getTokens(0, tokens.size() - 1, self._keywords) or []:
            index = keyword.getTokenIndex() + 1
            while tokens.get(index).getChannel() != self._parsed_channel:
                index += 1
            token = tokens.get(index)  # EOF at the end, on the default channel
            if token.getType() in self._string_types:
                string = self._parser.parseExpression(token.getText()).eval(None).toString()
                if (name := self._special(string, self._literal_types[keyword.getType()])) is not None:
                    return name
        return None

    def in_casts(self, node) -> str | None:
        """The first special value a cast of a constant string to a date or timestamp reads in
        the expressions of ``node``, one operator, as Spark's SpecialDatetimeValues rule reads
        them: after ReplaceExpressions, the rule before it, has replaced ``to_timestamp``,
        ``nvl``, ... by what runs (subquery plans are operators of their own)."""
        for expression in _expressions(self._replace_expressions.apply(node)):
            if (name := self._in_cast(expression)) is not None:
                return name
        return None

    def _in_cast(self, expression) -> str | None:
        if _class(expression) != "Cast":
            return None
        kind, child = expression.dataType().typeName(), expression.child()
        is_string = is_instance_of(self._gateway, child.dataType(), STRING_TYPE)
        if kind not in SPECIAL_DATETIME_READERS or not is_string:
            return None
        value = _constant(child)
        return None if value is NOT_CONSTANT or value is None else self._special(str(value), kind)

    def _special(self, string: str, kind: str) -> str | None:
        if not getattr(self._readers, SPECIAL_DATETIME_READERS[kind])(string, self._zone).isDefined():
            return None
        name = re.findall(r"[a-z]+", string.lower())[0]  # as Spark read it: its first word
        return None if name == "epoch" else name


def _special_refusal(name: str) -> str:
    meaning = SPECIAL_DATETIMES.get(name, "a time Spark takes from the clock")
    return f"the special datetime value '{name}' ({meaning}) is not allowed: write the date or time itself"


NOT_CONSTANT = object()


def _constant(expression) -> Any:
    """The value of ``expression`` (None for null) if it is foldable and evaluates, as Spark's
    optimizer evaluates it; else NOT_CONSTANT (where the evaluation fails, so does the query)."""
    if not expression.foldable():
        return NOT_CONSTANT
    try:
        return expression.eval(None)
    except (Py4JJavaError, PySparkException):
        return NOT_CONSTANT


def _draws_random_iv(expression) -> bool:
    """Whether ``aes_encrypt`` may draw its IV at random: it does for an empty IV in any mode
    but ECB (which takes no IV), so only a constant IV or a constant ECB mode is reproducible."""
    _, _, mode, _, iv, _ = _scala(expression.children())
    if str(_constant(mode)).upper() == "ECB":
        return False
    value = _constant(iv)
    return value is NOT_CONSTANT or (value is not None and len(value) == 0)


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
