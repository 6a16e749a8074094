"""Temporal tables (``Transform.temporalTables``): an input joined as of each event's time.

Spark has no event-time temporal join, but it has stream-static joins; so a temporal table is
a *static* view of the input's whole history with a validity interval per version, and the
user's temporal join becomes a plain join with it plus the interval condition.

- History. Every Execute call appends the input's new slices to ``temporal/<input>/`` in the
  checkpoint (checkpoint.py carries the earlier files over), each row numbered in arrival
  order (``__odf_seq``).
- The view. Per key, a version is valid from its event time until the next version's event
  time (ties go to the later arrival: its predecessor's interval is empty); a removal (the
  observation column says the removed value, snapshot merges) ends the previous version and is
  then dropped, so a removed key matches nothing until it comes back. ``__odf_valid_from`` and
  ``__odf_valid_to`` (null: still valid) are hidden: each step's result drops them.
- The rewrite, on Spark's lexer tokens (comments and strings are single tokens):
  ``JOIN dim FOR SYSTEM_TIME AS OF e.event_time AS d ON cond`` becomes
  ``JOIN dim AS d ON (interval) AND (cond)``; ``FROM e, LATERAL TABLE (dim(e.event_time)) AS d``
  (the 0.18-era form) becomes ``FROM e JOIN dim AS d ON (interval)``. Only inner and left
  joins; ``AS OF`` names the event time column of a streamed input; a temporal table read any
  other way is refused, because its history as a plain table depends on when the call ran.
- Readiness (streaming.py): an event is fed to Spark only once every temporal table's
  watermark has reached its event time; until then it waits in ``pending/`` in the checkpoint.
  Every version a ready event can match has then arrived, so the result depends neither on how
  nor in which order the inputs arrived.
"""
from __future__ import annotations

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

# Tokens that end a join condition when met outside parentheses.
CONDITION_END = {
    "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "SEMI", "ANTI", "WHERE", "GROUP",
    "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "UNION", "EXCEPT", "INTERSECT", "MINUS",
    "CLUSTER", "DISTRIBUTE", "SORT", "COMMA", "LATERAL", "PIVOT", "UNPIVOT", "QUALIFY",
    "SEMICOLON", "RIGHT_PAREN", "EOF",
}
# Words that cannot be a relation's alias written without AS.
NOT_ALIAS = CONDITION_END | {"ON", "USING", "AS", "OUTER"}


@dataclass(frozen=True)
class Tables:
    """The transform's temporal tables (view name -> primary key) and the event time columns
    of its streamed inputs, the only columns ``AS OF`` may name."""

    keys: dict[str, tuple[str, ...]]
    event_times: frozenset[str]

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
        event_times = frozenset(i.vocab.event_time_column or "event_time" for i in inputs
                                if i.dataset_id not in keys)
        if keys and not event_times:
            raise EngineFailure(Kind.INVALID_QUERY, "every input is a temporal table: a temporal join "
                                                    "needs a streamed input to join them with")
        return Tables(keys, event_times)


NONE = Tables({}, frozenset())  # for the batch uses that have no temporal tables


# ----- the rewrite ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # Spark's symbolic token name: JOIN, IDENTIFIER, LEFT_PAREN, ...
    text: str
    start: int  # character offsets in the statement, stop inclusive
    stop: int

    @property
    def name(self) -> str:
        """The identifier it spells (backquotes removed)."""
        if self.kind == "BACKQUOTED_IDENTIFIER":
            return self.text[1:-1].replace("``", "`")
        return self.text


def rewrite(session, sql: str, tables: Tables, refuse) -> str:
    """``sql`` with its temporal joins turned into joins with the temporal views; ``refuse``
    makes the one-line failure of this step from a message."""
    if not tables.keys:
        return sql
    tokens = _tokens(session, sql)
    edits: list[tuple[int, int, str]] = []  # (start, stop exclusive, replacement)
    joined: set[int] = set()  # indexes of the relation tokens the rewrite handled
    for i, token in enumerate(tokens):
        if token.kind == "FOR" and [t.kind for t in tokens[i + 1:i + 4]] == ["SYSTEM_TIME", "AS", "OF"]:
            relation = tokens[i - 1]
            _check_table(relation, tables, refuse, "FOR SYSTEM_TIME AS OF")
            _check_join(tokens, i - 2, relation, refuse)
            time, after = _time(tokens, i + 4, tables, refuse)
            edits.append((token.start, tokens[after - 1].stop + 1, ""))
            _add_condition(tokens, after, relation, time, edits, refuse)
            joined.add(i - 1)
        elif token.kind == "LATERAL" and [t.kind for t in tokens[i + 1:i + 3]] == ["TABLE", "LEFT_PAREN"]:
            relation = tokens[i + 3]
            _check_table(relation, tables, refuse, "LATERAL TABLE")
            if tokens[i + 4].kind != "LEFT_PAREN":
                raise refuse(f"LATERAL TABLE ({relation.text}(...)): give the event time as its argument")
            time, after = _time(tokens, i + 5, tables, refuse)
            if [t.kind for t in tokens[after:after + 2]] != ["RIGHT_PAREN", "RIGHT_PAREN"]:
                raise refuse(f"LATERAL TABLE ({relation.text}(...)): its one argument is the event time")
            before = tokens[i - 1]
            if before.kind == "COMMA":  # FROM e, LATERAL TABLE (...): an inner join
                edits.append((before.start, tokens[after + 1].stop + 1, f" JOIN {relation.text}"))
            else:
                _check_join(tokens, i - 1, relation, refuse)
                edits.append((token.start, tokens[after + 1].stop + 1, relation.text))
            _add_condition(tokens, after + 2, relation, time, edits, refuse)
            joined.add(i + 3)
    for i, token in enumerate(tokens):
        if token.name in tables.keys and i not in joined and tokens[i + 1].kind != "DOT":
            raise refuse(f"input {token.name} is a temporal table: join it with "
                         f"`JOIN {token.text} FOR SYSTEM_TIME AS OF <event time> AS alias ON ...`")
    for start, stop, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[stop:]
    return sql


def _tokens(session, sql: str) -> list[_Token]:
    """The tokens Spark's parser reads (not spaces and comments), EOF last."""
    jvm = session.sparkContext._jvm
    parser, antlr = jvm.org.apache.spark.sql.catalyst.parser, jvm.org.antlr.v4.runtime
    lexer = parser.SqlBaseLexer(parser.UpperCaseCharStream(antlr.CharStreams.fromString(sql)))
    lexer.removeErrorListeners()  # a statement that does not lex fails in Spark's parser
    stream = antlr.CommonTokenStream(lexer)
    stream.fill()
    vocabulary, channel = lexer.getVocabulary(), antlr.Token.DEFAULT_CHANNEL
    tokens = []
    for k in range(stream.size()):
        token = stream.get(k)
        if token.getChannel() == channel:
            kind = vocabulary.getSymbolicName(token.getType()) or "EOF"
            tokens.append(_Token(kind, token.getText(), token.getStartIndex(), token.getStopIndex()))
    return tokens


def _check_table(relation: _Token, tables: Tables, refuse, syntax: str) -> None:
    if relation.name not in tables.keys:
        listed = ", ".join(sorted(tables.keys))
        raise refuse(f"{syntax} {relation.text}: not a temporal table of this transform "
                     f"(temporalTables lists {listed})")


def _check_join(tokens: list[_Token], i: int, relation: _Token, refuse) -> None:
    """The temporal table after ``tokens[i]`` must be the right side of an inner or left join."""
    if tokens[i].kind != "JOIN":
        raise refuse(f"temporal table {relation.text}: join it (JOIN ... FOR SYSTEM_TIME AS OF ...)")
    kind = tokens[i - 1].kind if i > 0 else ""
    if kind == "OUTER" and i > 1:
        kind = tokens[i - 2].kind
    if kind in {"RIGHT", "FULL", "CROSS", "SEMI", "ANTI", "NATURAL"}:
        raise refuse(f"temporal table {relation.text}: a temporal join is an inner or left join, not {kind}")


def _time(tokens: list[_Token], i: int, tables: Tables, refuse) -> tuple[str, int]:
    """The event time reference at ``i`` (a possibly qualified column) and the index after it."""
    parts, j = [tokens[i]], i + 1
    while tokens[j].kind == "DOT" and tokens[j + 1].kind != "EOF":
        parts.append(tokens[j + 1])
        j += 2
    text = "".join(t.text for t in tokens[i:j])
    if parts[-1].name not in tables.event_times or parts[-1].kind in {"STRING_LITERAL", "INTEGER_VALUE"}:
        names = ", ".join(sorted(tables.event_times))
        raise refuse(f"AS OF {text}: name the event time column of the streamed input ({names})")
    return text, j


def _add_condition(tokens: list[_Token], i: int, relation: _Token, time: str, edits, refuse) -> None:
    """Adds the validity interval to the join condition of the relation whose alias (if any)
    starts at ``i``; a join without ON gets one."""
    alias = None
    if tokens[i].kind == "AS":
        alias, i = tokens[i + 1], i + 2
    elif tokens[i].kind not in NOT_ALIAS:
        alias, i = tokens[i], i + 1
    table = (alias or relation).text
    interval = (f"({time} >= {table}.`{VALID_FROM}` AND "
                f"({table}.`{VALID_TO}` IS NULL OR {time} < {table}.`{VALID_TO}`))")
    if tokens[i].kind == "USING":
        raise refuse(f"temporal table {relation.text}: give the join condition with ON, not USING")
    if tokens[i].kind != "ON":
        edits.append((tokens[i - 1].stop + 1, tokens[i - 1].stop + 1, f" ON {interval}"))
        return
    end, depth = i + 1, 0
    while True:
        kind = tokens[end].kind
        if kind == "LEFT_PAREN":
            depth += 1
        elif kind == "RIGHT_PAREN" and depth:
            depth -= 1
        elif depth == 0 and kind in CONDITION_END and not (
            kind in {"LEFT", "RIGHT"} and tokens[end + 1].kind == "LEFT_PAREN"  # left(s, n)
        ):
            break
        end += 1
    on = tokens[i]
    edits.append((on.stop + 1, on.stop + 1, f" {interval} AND ("))
    edits.append((tokens[end - 1].stop + 1, tokens[end - 1].stop + 1, ")"))


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
        removed = pc.equal(view[message.observation_column], message.removed_value or "D")
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
