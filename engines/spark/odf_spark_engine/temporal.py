"""Temporal tables (``Transform.temporalTables``): an input joined as of each event's time.

Spark has no event-time temporal join, but it has stream-static joins; so a temporal table is
a *static* view of the input's whole history with a validity interval per version, and the
user's temporal join becomes a plain join with it plus the interval condition.

- History. Every Execute call appends the input's new slices to ``temporal/<input>/`` in the
  checkpoint (checkpoint.py carries the earlier files over), each row numbered in arrival
  order (``__odf_seq``).
- The view. Per key, a version is valid from its event time until the next version's event
  time (ties go to the later arrival: its predecessor's interval is empty); a removal (the
  observation column says the removed value: a 0.18 snapshot's `D`, a 0.39 input's op 1, which
  the coordinator dates at its block's watermark) ends the previous version and is then
  dropped, so a removed key matches nothing until it comes back. ``__odf_valid_from`` and
  ``__odf_valid_to`` (null: still valid) are hidden: each step's result drops them.
- The rewrite, on Spark's own parse tree of the step (SqlBaseParser: comments, strings and
  keywords used as names are what Spark reads them as): ``JOIN dim FOR SYSTEM_TIME AS OF
  e.event_time AS d ON cond`` becomes ``JOIN <view> AS d ON (interval) AND (cond)``; ``FROM e,
  LATERAL TABLE (dim(e.event_time)) AS d`` (the 0.18-era form) becomes ``FROM e JOIN <view> AS
  d ON (interval)``. Only inner and left joins. ``<view>`` is the temporal table's private view
  (``Tables.views``): its name holds a digest of the transform's queries, so no query can name
  it, and the table is registered under no other name.
- The rest is the SQL policy's, on Spark's plans (policy.py): the table's own name read any
  other way (``FROM``, ``JOIN``, ``IDENTIFIER('...')``, a subquery) is refused, and each
  private view must be the right side of a join whose ``AS OF`` column is, unchanged, the event
  time column of a streamed input: read otherwise, a temporal table's history depends on when
  the call ran and an event could meet versions from its future.
- Errors speak of the user's SQL: positions are mapped back through ``Rewritten.user_offset``.
- Readiness (streaming.py): an event is fed to Spark only once every temporal table's
  watermark has reached its event time; until then it waits in ``pending/`` in the checkpoint.
  Every version a ready event can match has then arrived, so the result depends neither on how
  nor in which order the inputs arrived.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .checkpoint import HISTORY_DIR, PENDING_DIR
from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb

VALID_FROM = "__odf_valid_from"
VALID_TO = "__odf_valid_to"
HIDDEN = (VALID_FROM, VALID_TO)
SEQ = "__odf_seq"  # arrival order of a history row
TIME = pa.timestamp("us", tz="UTC")

PRIVATE = "__odf_temporal_"  # view names: PRIVATE + digest of the transform's queries + ":" + input


@dataclass(frozen=True)
class Tables:
    """The transform's temporal tables (input -> primary key), the private view name each is
    read by, and the event time column of each streamed input (what ``AS OF`` may name)."""

    keys: dict[str, tuple[str, ...]]
    event_times: dict[str, str]
    views: dict[str, str]

    @staticmethod
    def of(transform: pb.Transform, inputs) -> Tables:
        """``inputs``: the request's input messages (each with ``dataset_id``, ``vocab`` and
        ``arrow_schema``); each temporal table must have its key and event time columns."""
        keys = {t.id: tuple(t.primary_key) for t in transform.temporal_tables}
        by_name = {i.dataset_id: i for i in inputs}
        for name, key in keys.items():
            if name not in by_name:
                raise EngineFailure(Kind.INVALID_REQUEST,
                                    f"temporal table {name} is not an input of the transform")
            columns = pa.ipc.read_schema(pa.py_buffer(by_name[name].arrow_schema)).names
            event_time = by_name[name].vocab.event_time_column or "event_time"
            missing = [c for c in (*key, event_time) if c not in columns]
            if missing or not key:
                lacking = ", ".join(missing) or "in its primary key"
                raise EngineFailure(Kind.INVALID_QUERY, f"temporal table {name}: no column {lacking} "
                                                        f"(it has {', '.join(columns)})")
        event_times = {i.dataset_id: i.vocab.event_time_column or "event_time" for i in inputs
                       if i.dataset_id not in keys}
        if keys and not event_times:
            raise EngineFailure(Kind.INVALID_QUERY, "every input is a temporal table: a temporal join "
                                                    "needs a streamed input to join them with")
        # A query cannot name a view whose name holds a digest of the query's own text.
        digest = hashlib.sha256("\0".join(q.query for q in transform.queries).encode()).hexdigest()[:16]
        return Tables(keys, event_times, {name: f"{PRIVATE}{digest}:{name}" for name in keys})

    def view(self, name: str) -> str:
        """The name input ``name`` is registered by."""
        return self.views.get(name, name)


NONE = Tables({}, {}, {})  # for the batch uses that have no temporal tables


def input_of(view: str) -> str:
    """The input a view name stands for (a temporal table's private view: the table)."""
    return view.split(":", 1)[1] if view.startswith(PRIVATE) and ":" in view else view


# ----- the rewrite ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rewritten:
    """A step's SQL (``user``) and what Spark plans (``sql``): ``user`` with the ``edits``
    (start, stop exclusive, replacement; in ``user``, ascending) applied."""

    user: str
    edits: tuple[tuple[int, int, str], ...] = ()

    @property
    def sql(self) -> str:
        sql = self.user
        for start, stop, text in reversed(self.edits):
            sql = sql[:start] + text + sql[stop:]
        return sql

    def user_offset(self, offset: int) -> int:
        """Where ``offset`` of ``sql`` is in ``user`` (inside an added text: where it was added)."""
        shift = 0
        for start, stop, text in self.edits:
            if offset < start + shift:
                break
            if offset < start + shift + len(text):
                return start
            shift += len(text) - (stop - start)
        return offset - shift


def rewrite(session, sql: str, tables: Tables, step) -> Rewritten:
    """``sql`` with its temporal joins made joins of the temporal tables' private views with
    the validity interval; ``step`` (policy.Step) makes the one-line failures. A statement
    that does not parse is left as it is, for Spark's parser to report."""
    if not tables.keys:
        return Rewritten(sql)
    found = _parse(session, sql)
    if found is None:
        return Rewritten(sql)
    tree, parser = found
    xpath = session.sparkContext._jvm.org.antlr.v4.runtime.tree.xpath.XPath
    edits: list[tuple[int, int, str]] = []
    for clause in xpath.findAll(tree, "//temporalClause", parser):
        primary = clause.getParent()
        named = primary.getChild(0).getChild(0)  # temporalTableIdentifierReference > identifierReference
        written = _text(sql, named)
        table = _table(session, named, written, tables, step, "FOR SYSTEM_TIME AS OF")
        if clause.getChild(clause.getChildCount() - 4).getText().upper() not in {"SYSTEM_TIME", "TIMESTAMP"}:
            raise step.invalid(f"temporal table {table}: join it as of a time (FOR SYSTEM_TIME AS OF ...), "
                               "not a version")
        time = _text(sql, clause.getChild(clause.getChildCount() - 1))
        join = _join(sql, primary, table, step)
        edits.append((_start(named), _stop(clause), _aliased(tables.views[table], primary, written)))
        edits += _condition(join, primary, time, _alias(sql, primary, written), table, step)
    for call in xpath.findAll(tree, "//tableFunctionCall", parser):
        holder = call.getParent()  # the call with its alias
        primary = holder.getParent()
        lateral = _previous(primary)
        if _text(sql, call.getChild(0)).upper() != "TABLE" or lateral is None \
                or lateral.getText().upper() != "LATERAL":
            continue
        inner = _call(call)
        written = "" if inner is None else _text(sql, inner.getChild(0))
        if inner is None or inner.getChildCount() != 4:
            raise step.invalid(f"LATERAL TABLE ({written or '...'}(<event time>)): name a temporal table "
                               "and give the event time as its one argument")
        table = _table(session, inner.getChild(0), written, tables, step, "LATERAL TABLE")
        time = _text(sql, inner.getChild(2))
        view, alias = _aliased(tables.views[table], holder, written), _alias(sql, holder, written)
        if _rule(primary.getParent()) == "Relation":  # FROM e, LATERAL TABLE (...): an inner join
            comma = _previous(primary.getParent())
            if comma is None or comma.getText() != ",":
                raise step.invalid(f"temporal table {table}: join it (FROM e, LATERAL TABLE "
                                   f"({written}(e.event_time)) AS alias)")
            edits.append((_start(comma), _stop(call), f" JOIN {view}"))
            edits.append((_stop(holder), _stop(holder), f" ON {_interval(time, alias)}"))
        else:
            join = _join(sql, primary, table, step)
            edits.append((_start(lateral), _stop(call), view))
            edits += _condition(join, holder, time, alias, table, step)
    return Rewritten(sql, tuple(sorted(edits)))


def _parse(session, sql: str):
    """Spark's parse tree of ``sql`` and its parser, or None where it has a syntax error."""
    jvm = session.sparkContext._jvm
    spark_parser, antlr = jvm.org.apache.spark.sql.catalyst.parser, jvm.org.antlr.v4.runtime
    lexer = spark_parser.SqlBaseLexer(spark_parser.UpperCaseCharStream(antlr.CharStreams.fromString(sql)))
    lexer.removeErrorListeners()
    parser = spark_parser.SqlBaseParser(antlr.CommonTokenStream(lexer))
    parser.removeErrorListeners()
    tree = parser.singleStatement()
    return None if parser.getNumberOfSyntaxErrors() else (tree, parser)


def _rule(node) -> str:
    return node.getClass().getSimpleName().removesuffix("Context")


def _start(node) -> int:
    token = node.getSymbol() if _rule(node) == "TerminalNodeImpl" else node.getStart()
    return token.getStartIndex()


def _stop(node) -> int:
    """Just after the node's last character."""
    token = node.getSymbol() if _rule(node) == "TerminalNodeImpl" else node.getStop()
    return token.getStopIndex() + 1


def _text(sql: str, node) -> str:
    """The user's text of a node, comments and spacing inside it as written."""
    return sql[_start(node):_stop(node)]


def _previous(node):
    """The sibling before ``node`` (None for the first)."""
    parent = node.getParent()
    index = next(i for i in range(parent.getChildCount()) if parent.getChild(i).equals(node))
    return parent.getChild(index - 1) if index else None


def _table(session, named, written: str, tables: Tables, step, syntax: str) -> str:
    """The temporal table the relation ``named`` (written ``written``) names."""
    if written.upper().startswith("IDENTIFIER"):
        raise step.invalid(f"{syntax} {written}: name the temporal table by its id in backquotes")
    seq = session._jsparkSession.sessionState().sqlParser().parseMultipartIdentifier(written)
    parts = [seq.apply(i) for i in range(seq.size())]
    if len(parts) != 1 or parts[0] not in tables.keys:
        listed = ", ".join(sorted(tables.keys))
        raise step.invalid(f"{syntax} {written}: not a temporal table of this transform "
                           f"(temporalTables lists {listed}; name it by its id in backquotes)")
    return parts[0]


def _call(call):
    """The one argument of ``TABLE(...)`` if it is a function call (``table(time)``), else None."""
    if call.getChildCount() != 4:  # TABLE ( argument )
        return None
    node = call.getChild(2)
    while node.getChildCount() == 1:
        node = node.getChild(0)
    return node if _rule(node) == "FunctionCall" else None


def _join(sql: str, primary, table: str, step):
    """The join whose right side is ``primary``: an inner or left join."""
    join = primary.getParent()
    if _rule(join) != "JoinRelation":
        raise step.invalid(f"temporal table {table}: join it (JOIN `{table}` FOR SYSTEM_TIME AS OF ...)")
    first = join.getChild(0)  # NATURAL, or the join type (no text for a plain JOIN)
    kind = first.getText().upper()
    if kind not in {"", "INNER", "LEFT", "LEFTOUTER"}:
        written = " ".join(_text(sql, first).upper().split())
        raise step.invalid(f"temporal table {table}: a temporal join is an inner or left join, not {written}")
    return join


def _has_criteria(join) -> int:
    last = join.getChild(join.getChildCount() - 1)
    return 1 if _rule(last) == "JoinPostfix" else 0


def _table_alias(holder):
    """The alias clause of a relation (no children where the query gives none)."""
    return next(holder.getChild(i) for i in range(holder.getChildCount())
                if _rule(holder.getChild(i)) == "TableAlias")


def _aliased(view: str, holder, written: str) -> str:
    """The private view, under the name the query uses where it gives no alias."""
    return f"`{view}`" + ("" if _table_alias(holder).getChildCount() else f" AS {written}")


def _alias(sql: str, holder, written: str) -> str:
    """The name the query's conditions use for the temporal table (its alias, else its name)."""
    alias = _table_alias(holder)
    if not alias.getChildCount():
        return written
    named = alias.getChild(1 if _rule(alias.getChild(0)) == "TerminalNodeImpl" else 0)  # after AS
    return _text(sql, named)


def _interval(time: str, alias: str) -> str:
    # The cast: an AS OF column of another type is the policy's to refuse, by its name, not
    # Spark's, by the interval's columns, which the user never wrote.
    time = f"CAST(({time}) AS TIMESTAMP)"
    return (f"({time} >= {alias}.`{VALID_FROM}` AND "
            f"({alias}.`{VALID_TO}` IS NULL OR {time} < {alias}.`{VALID_TO}`))")


def _condition(join, primary, time: str, alias: str, table: str, step) -> list[tuple[int, int, str]]:
    """The edits that put the validity interval in the join's condition (a join without one gets ON)."""
    interval = _interval(time, alias)
    if not _has_criteria(join):
        return [(_stop(primary), _stop(primary), f" ON {interval}")]
    criteria = join.getChild(join.getChildCount() - 1).getChild(0)
    if _rule(criteria) != "JoinCriteria" or criteria.getChild(0).getText().upper() != "ON":
        raise step.invalid(f"temporal table {table}: give the join condition with ON, not USING")
    condition = criteria.getChild(1)
    return [(_start(condition), _start(condition), f"{interval} AND ("),
            (_stop(condition), _stop(condition), ")")]


# ----- history and view -----------------------------------------------------------------------


def add_history(message: pb.ExecuteInput, new_dir: Path, run: int) -> None:
    """Appends the input's new slices to its history in ``new_dir`` (which holds the previous
    checkpoint's), each row numbered in arrival order after the rows already there."""
    folder = history_folder(new_dir, message.dataset_id)
    folder.mkdir(parents=True, exist_ok=True)
    seq = sum(pq.ParquetFile(f).metadata.num_rows for f in folder.glob("*.parquet"))
    for k, path in enumerate(message.data_paths):
        table = pq.read_table(path)
        table = table.append_column(SEQ, pa.array(range(seq, seq + table.num_rows), pa.int64()))
        seq += table.num_rows
        pq.write_table(table, folder / f"{run:08d}-{k:06d}.parquet")


def write_view(new_dir: Path, message: pb.ExecuteInput, key: tuple[str, ...], target: Path) -> None:
    """Writes the temporal view of the input's history to ``target``: its columns, then the
    validity interval of each version; removals dropped."""
    schema = pa.ipc.read_schema(pa.py_buffer(message.arrow_schema))
    tables = [pq.read_table(f) for f in sorted(history_folder(new_dir, message.dataset_id).glob("*.parquet"))]
    history = (pa.concat_tables(tables, promote_options="permissive") if tables
               else schema.empty_table().append_column(SEQ, pa.array([], pa.int64())))
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(view_of(history, message, key), target)


def view_of(history: pa.Table, message: pb.ExecuteInput, key: tuple[str, ...],
            carried: tuple[str, ...] = ()) -> pa.Table:
    """The temporal view of ``history`` (the input's rows, ``SEQ`` numbering them in arrival
    order): its columns, the ``carried`` columns of ``history`` (provenance's row identity),
    then the validity interval of each version; removals dropped."""
    schema = pa.ipc.read_schema(pa.py_buffer(message.arrow_schema))
    event_time = message.vocab.event_time_column or "event_time"
    order = [(k, "ascending") for k in (*key, event_time, SEQ)]
    history = history.sort_by(order).combine_chunks()
    valid_from = pc.cast(history[event_time], TIME)
    view = history.drop_columns([SEQ]).append_column(VALID_FROM, valid_from)
    view = view.append_column(VALID_TO, _next_of_same_key(history, key, valid_from))
    if message.observation_column and message.observation_column in view.column_names:
        # a 0.18 snapshot's observation column (text), or a 0.39 input's op (a number)
        observed = pc.cast(view[message.observation_column], pa.string())
        removed = pc.equal(observed, message.removed_value or "D")
        view = view.filter(pc.invert(pc.fill_null(removed, False)))
    data = view.select(schema.names).cast(schema)
    kept = [*carried, *HIDDEN]
    return pa.Table.from_arrays([*data.columns, *view.select(kept).columns],
                                schema=pa.schema([*schema, *view.select(kept).schema]))


def _next_of_same_key(history: pa.Table, key: tuple[str, ...], valid_from) -> pa.Array:
    """Each row's next row's ``valid_from`` where that row has the same key, else null."""
    n = history.num_rows
    if n == 0:
        return pa.array([], TIME)
    same = pa.array([True] * (n - 1), pa.bool_())
    for k in key:
        column = history[k]
        same = pc.and_(same, pc.fill_null(pc.equal(column.slice(0, n - 1), column.slice(1)), False))
    following = pc.if_else(same, valid_from.slice(1), pa.nulls(n - 1, TIME))
    return pa.concat_arrays([_array(following), pa.nulls(1, TIME)])


def _array(values) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def view_schema(schema: pa.Schema) -> pa.Schema:
    """The temporal view's columns: the input's, then the hidden validity interval."""
    return pa.schema([*schema, pa.field(VALID_FROM, TIME), pa.field(VALID_TO, TIME)])


def history_folder(checkpoint_dir: Path, dataset_id: str) -> Path:
    return checkpoint_dir / HISTORY_DIR / _file_name(dataset_id)


def pending_file(checkpoint_dir: Path, dataset_id: str) -> Path:
    return checkpoint_dir / PENDING_DIR / f"{_file_name(dataset_id)}.parquet"


def pending_count(checkpoint_dir: Path, dataset_id: str) -> int:
    """The input's rows waiting in the checkpoint for the temporal tables (from the file's footer)."""
    pending = pending_file(checkpoint_dir, dataset_id)
    return pq.ParquetFile(pending).metadata.num_rows if pending.is_file() else 0


def split_ready(table: pa.Table, event_time: str, ready: datetime | None) -> tuple[pa.Table, pa.Table]:
    """The rows whose event time the temporal tables' watermark ``ready`` has reached, and the
    rest (all of them while a temporal table has no watermark). Rows without an event time
    are not held (the engine drops them anyway)."""
    if ready is None:
        return table.slice(0, 0), table
    times = pc.cast(table[event_time], TIME)
    is_ready = pc.fill_null(pc.less_equal(times, pa.scalar(ready, TIME)), True)
    return table.filter(is_ready), table.filter(pc.invert(is_ready))


def _file_name(dataset_id: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in dataset_id)
