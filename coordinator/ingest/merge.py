"""Merge step: combine newly read rows with what the dataset already holds.

- append: every row, as read.
- ledger: rows whose primary key the dataset has never seen (nor an earlier row of this pull).
- snapshot: change data capture between the previous state (the latest row per key, removed
  keys dropped: see ``projection``) and a new full snapshot: keys that appear → added (``I``),
  whose compared values differ → changed (``U``), that disappear → removed (``D``, carrying
  their previous values). Into a current-ODF (0.39) root the same changes are the standard's
  operation types, as the reference writes them: added → append (0), changed → correct-from
  (2, the previous values) then correct-to (3, the new values), removed → retract (1, the
  previous values, event time included); the event time is compared too when the data has
  its own (``SnapshotColumns.ops``).
- changelog stream (current-ODF roots): the records as given, each with its operation type,
  checked (``check_changelog``: known types, each correct-from directly followed by its
  correct-to of the same key) and checked against the state they change, which the reference
  does not: a retraction or a correct-from must repeat, value for value (the event time too
  when the data gives its own), the record held for its key just before it, in the order the
  slice stores the records (``data.odf_order``: by key, then operation type, as the reference
  stores them; this decides the state); a key not held, or
  other values, is refused naming the row.
- upsert stream (current-ODF roots): each key's last record of the batch is an upsert, or a
  deletion if its operation type is retract (no column: all upserts); ``upsert`` is the
  snapshot merge of the state restricted to the batch's keys against the upserts, as the
  reference computes it: a new key an append, a changed row a correct-from/correct-to pair, an
  unchanged one nothing, a deleted key a retraction of the values held. As in the reference a
  deletion names its key only (the values retracted are the ones held, not the record's), but
  unlike it a deletion of a key not held just before it (by the state, or by the batch's
  records before it) is refused naming the row, not dropped.

Keys of any types and arity are mapped to small integer codes (equal key tuples get equal
codes across tables): an integer key of a narrow range is its own code, other keys go through
Arrow's hash-based ``dictionary_encode``. All matching is then numpy indexing over those
codes, and rows are moved with ``take``. No loop runs per row.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data.odf_slice import OPERATION_TYPES, Op, operation_type_problem
from ..metadata.objects import MergeStrategySnapshot
from ..metadata.odf39.adapt import StreamMerge
from ..metadata.timestamps import format_timestamp
from .errors import IngestError


def check_key(table: pa.Table, key: list[str], name: str, rows_before: int = 0) -> None:
    """Every key column present and never null (a null key matches nothing); ``rows_before``:
    the file's rows before ``table`` (a piece of it), for messages."""
    for column in key:
        if column not in table.column_names:
            raise IngestError(f"{name}: primary key column {column!r} is not in the data "
                              f"(columns: {', '.join(table.column_names)})")
        col = table.column(column)
        if col.null_count:
            row = pc.index(pc.is_null(col), True).as_py()
            raise IngestError(f"{name}: row {rows_before + row + 1}: primary key column "
                              f"{column!r} is null")


def key_codes(tables: list[pa.Table], key: list[str]) -> list[np.ndarray]:
    """Per table, an int64 code per row such that equal key tuples have equal codes."""
    sizes = [t.num_rows for t in tables]
    combined: np.ndarray | None = None
    for column in key:
        first_type = tables[0].schema.field(column).type
        chunks = [c for t in tables for c in t.column(column).cast(first_type).chunks]
        codes = _column_codes(pa.chunked_array(chunks, first_type))
        if combined is None:
            combined = codes
        else:  # pair the codes so far with this column's, then make them dense again
            pairs = combined * (int(codes.max(initial=0)) + 1) + codes
            combined = _dense_codes(pa.chunked_array([pa.array(pairs)]))
    assert combined is not None, "a merge key has at least one column"
    bounds = np.cumsum([0, *sizes])
    return [combined[bounds[i]:bounds[i + 1]] for i in range(len(tables))]


def _column_codes(values: pa.ChunkedArray) -> np.ndarray:
    """Codes of one key column: an integer key in a range not much wider than the number of
    rows (ids usually are) is its own code, offset to start at 0; anything else is hashed."""
    if pa.types.is_integer(values.type) and not values.null_count and len(values):
        low, high = (v.as_py() for v in pc.min_max(values).values())
        if high - low < 4 * len(values):
            ints = np.concatenate([c.to_numpy() for c in values.chunks])
            return (ints - ints.dtype.type(low)).astype(np.int64)
    return _dense_codes(values)


def _dense_codes(values: pa.ChunkedArray) -> np.ndarray:
    encoded = pc.dictionary_encode(values.combine_chunks() if values.num_chunks != 1
                                   else values.chunk(0))
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


# --- ledger ------------------------------------------------------------------------------------


def ledger(new: pa.Table, key: list[str], seen: pa.Table | None) -> pa.Table:
    """The rows of ``new`` with a key not in ``seen`` (keys only) and not earlier in ``new``."""
    tables = [new] if seen is None else [new, seen]
    codes = key_codes(tables, key)
    _, first = np.unique(codes[0], return_index=True)  # first row of each key in `new`
    if seen is not None:
        known = np.zeros(int(max(c.max(initial=0) for c in codes)) + 1, dtype=bool)
        known[codes[1]] = True
        first = first[~known[codes[0][first]]]
    return new.take(np.sort(first))


# --- snapshot ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotColumns:
    """A snapshot merge's column roles, with the spec's defaults filled in.

    With ``ops`` (a current-ODF root) the observation column is the operation type column
    and the values are ``Op`` codes: a change is then a correct-from/correct-to pair."""

    key: list[str]
    observation: str
    added: str | int
    changed: str | int
    removed: str | int
    compare: list[str] | None  # None = every data column but key, event time, observation
    ops: bool = False

    @staticmethod
    def of(strategy: MergeStrategySnapshot | StreamMerge,
           operation_type: str | None = None) -> SnapshotColumns:
        """The roles of ``strategy``; ``operation_type``: the column of a 0.39 root's ops (a
        stream merge's state is projected as a 0.39 snapshot root's)."""
        given = getattr(strategy, "compare_columns", None)
        compare = list(given) if given else None
        if operation_type is not None:
            return SnapshotColumns(key=list(strategy.primary_key), observation=operation_type,
                                   added=int(Op.APPEND), changed=int(Op.CORRECT_TO),
                                   removed=int(Op.RETRACT),
                                   compare=compare, ops=True)
        assert isinstance(strategy, MergeStrategySnapshot), "stream merges are 0.39's"
        return SnapshotColumns(
            key=list(strategy.primary_key),
            observation=strategy.observation_column or "observed",
            added=strategy.obsv_added or "I",
            changed=strategy.obsv_changed or "U",
            removed=strategy.obsv_removed or "D",
            compare=compare,
        )

    @property
    def observation_type(self) -> pa.DataType:
        return pa.int32() if self.ops else pa.string()


def projection(history: pa.Table, roles: SnapshotColumns) -> pa.Table:
    """The state a snapshot history describes: each key's latest row, unless it was removed.

    ``history`` is in commit order (oldest first), so the latest row is the last one.
    """
    codes = key_codes([history], roles.key)[0]
    _, first_from_end = np.unique(codes[::-1], return_index=True)
    latest = history.take(np.sort(len(codes) - 1 - first_from_end))
    if roles.observation in latest.column_names:
        kept = pc.fill_null(pc.not_equal(latest[roles.observation], roles.removed), True)
        latest = latest.filter(kept)
    return latest


def compare_columns(schema: pa.Schema, roles: SnapshotColumns, event_time_column: str,
                    name: str, own_event_time: bool = False) -> list[str]:
    """The columns whose change makes a ``U`` (by default every data column but the key, and
    the event time if ``roles.ops`` and ``own_event_time``: the data has its own, as the
    reference compares it); refuses data that has the observation column itself."""
    if roles.observation in schema.names:
        what = "operation type" if roles.ops else "snapshot merge's observation"
        raise IngestError(f"{name}: the data already has a column {roles.observation!r}, the "
                          f"{what} column; rename it (preprocess)")
    compared_time = roles.ops and own_event_time
    compare = roles.compare if roles.compare is not None else [
        c for c in schema.names
        if c not in roles.key and (c != event_time_column or compared_time)]
    missing = [c for c in compare if c not in schema.names]
    if missing:
        raise IngestError(f"{name}: compare column {missing[0]!r} is not in the data")
    return compare


def snapshot(previous: pa.Table | None, current: pa.Table, roles: SnapshotColumns,
             event_time_column: str, snapshot_time: datetime, name: str,
             own_event_time: bool = False) -> pa.Table:
    """The change events turning ``previous`` into ``current``: observation column first
    (``own_event_time``: whether the data gave its event time, see ``compare_columns``)."""
    compare = compare_columns(current.schema, roles, event_time_column, name, own_event_time)

    if previous is None:
        previous = current.schema.empty_table()
    codes_prev, codes_cur = key_codes([previous, current], roles.key)
    _check_unique(current, codes_cur, roles.key, name)
    size = int(max(codes_prev.max(initial=0), codes_cur.max(initial=0))) + 1
    prev_row = np.full(size, -1, dtype=np.int64)
    prev_row[codes_prev] = np.arange(len(codes_prev))  # keys of a projection are unique
    cur_row = np.full(size, -1, dtype=np.int64)
    cur_row[codes_cur] = np.arange(len(codes_cur))

    matched_prev = prev_row[codes_cur]  # per current row: its previous row, or -1
    is_new = matched_prev < 0
    both = np.nonzero(~is_new)[0]
    changed = np.zeros(len(both), dtype=bool)
    for column in compare:
        before = _column_or_nulls(previous, column, current.schema.field(column).type)
        changed |= _differs(before.take(matched_prev[both]), current[column].take(both))
    upserts = np.sort(np.concatenate([np.nonzero(is_new)[0], both[changed]]))
    removed = np.nonzero(cur_row[codes_prev] < 0)[0]
    if roles.ops:
        return _operations(previous, current, roles, np.nonzero(is_new)[0], both[changed],
                           matched_prev[both[changed]], removed)

    observed = np.where(is_new[upserts], roles.added, roles.changed)
    out = current.take(upserts)
    out = out.add_column(0, roles.observation, pa.array(observed, pa.string()))
    if len(removed):
        gone = previous.take(removed)
        columns = {roles.observation: pa.repeat(pa.scalar(roles.removed), len(removed))}
        for f in current.schema:
            columns[f.name] = _column_or_nulls(gone, f.name, f.type)
        time_type = current.schema.field(event_time_column).type
        columns[event_time_column] = pa.repeat(pa.scalar(snapshot_time, time_type), len(removed))
        out = pa.concat_tables([out, pa.table(columns, schema=out.schema)])
    return out


def _operations(previous: pa.Table, current: pa.Table, roles: SnapshotColumns,
                added: np.ndarray, changed: np.ndarray, was: np.ndarray,
                removed: np.ndarray) -> pa.Table:
    """The changes as operation types: appends (rows ``added`` of ``current``), correction
    pairs (row ``was[i]`` of ``previous`` directly before row ``changed[i]`` of ``current``),
    retractions (rows ``removed`` of ``previous``, their values as they were)."""

    def rows(table: pa.Table, index: np.ndarray, op: str | int) -> pa.Table:
        columns = {roles.observation: pa.repeat(pa.scalar(op, pa.int32()), len(index))}
        for f in current.schema:
            columns[f.name] = _column_or_nulls(table, f.name, f.type).take(index)
        return pa.table(columns)

    pairs = pa.concat_tables([rows(previous, was, Op.CORRECT_FROM),
                              rows(current, changed, Op.CORRECT_TO)])
    n = len(changed)
    pairs = pairs.take(np.stack([np.arange(n), np.arange(n, 2 * n)], axis=1).reshape(-1))
    return pa.concat_tables([rows(current, added, Op.APPEND), pairs,
                             rows(previous, removed, Op.RETRACT)])


def observed_as_operations(previous: pa.Table | None, changes: pa.Table, roles: SnapshotColumns,
                           operation_type: str, name: str) -> pa.Table:
    """A 0.18 snapshot slice's ``changes`` (its observed rows; ``roles`` 0.18's, no system time
    column) as the operation types a 0.39 snapshot merge writes for them, in the rows' order:
    ``I`` an append of the row, ``U`` a correct-from of the key's values in ``previous`` (the
    projection before the slice) directly followed by a correct-to of the row, ``D`` a
    retraction of the key's values in ``previous``: its event time included, where the 0.18
    row has the snapshot's. The operation type column, ``operation_type``, comes first; a row
    of another observation, or a ``U``/``D`` of a key ``previous`` lacks, is refused."""
    data = changes.drop_columns([roles.observation])
    observed = changes[roles.observation]
    n = data.num_rows
    first = np.full(n, -1, dtype=np.int32)  # the operation type of each row's first record
    for value, op in ((roles.added, Op.APPEND), (roles.changed, Op.CORRECT_FROM),
                      (roles.removed, Op.RETRACT)):
        first[pc.fill_null(pc.equal(observed, value), False).to_numpy(zero_copy_only=False)] = op
    if (unknown := np.flatnonzero(first < 0)).size:
        row = int(unknown[0])
        raise IngestError(f"{name}: row {row + 1}: column {roles.observation!r} is "
                          f"{observed[row].as_py()!r}, none of {roles.added!r}, "
                          f"{roles.changed!r}, {roles.removed!r}")
    before = pa.Table.from_arrays(
        [_column_or_nulls(previous if previous is not None else data.schema.empty_table(),
                          f.name, f.type) for f in data.schema], names=data.schema.names)
    _, was = _state_rows(before, data, roles.key)  # per row: its key's row in ``before``, or -1
    if (orphan := np.flatnonzero((first != Op.APPEND) & (was < 0))).size:
        row = int(orphan[0])
        raise IngestError(f"{name}: row {row + 1}: {observed[row].as_py()!r} of key "
                          f"{_key(data, roles.key, row)}, which the slices before it do not hold")
    sizes = 1 + (first == Op.CORRECT_FROM)
    rows = np.repeat(np.arange(n), sizes)  # per record, its row in ``changes``
    second = np.arange(len(rows)) - np.repeat(np.cumsum(sizes) - sizes, sizes) == 1
    ops = np.where(second, int(Op.CORRECT_TO), first[rows]).astype(np.int32)
    # a record's values: the row's own (an append, a correct-to), else the key's in ``before``
    taken = np.where((ops == Op.APPEND) | second, before.num_rows + rows, was[rows])
    both = pa.concat_tables([before, data], promote_options="permissive")
    return both.take(taken).add_column(0, operation_type, pa.array(ops, pa.int32()))


# --- stream merges ------------------------------------------------------------------------------


def check_operations(table: pa.Table, column: str, name: str, paired: bool) -> np.ndarray | None:
    """The operation types of ``table``'s ``column`` (None: no such column), refused in one line
    naming the row unless integers of the standard's types (``paired``: each correct-from
    directly followed by its correct-to)."""
    if column not in table.column_names:
        return None
    values = table.column(column)
    if not pa.types.is_integer(values.type):
        raise IngestError(f"{name}: column {column!r} holds the operation types and must be "
                          f"integers ({OPERATION_TYPES}), not {values.type}")
    if values.null_count:
        row = pc.index(pc.is_null(values), True).as_py()
        raise IngestError(f"{name}: row {row + 1}: column {column!r} is null; give each record's "
                          f"operation type ({OPERATION_TYPES})")
    ops = values.to_numpy().astype(np.int64)
    problem = operation_type_problem(ops, paired)
    if problem is not None:
        raise IngestError(f"{name}: row {problem[0] + 1}: column {column!r}: {problem[1]}")
    return ops.astype(np.int32)


def check_changelog(state: pa.Table | None, table: pa.Table, roles: SnapshotColumns,
                    event_time_column: str, name: str, own_event_time: bool) -> pa.Table:
    """A changelog stream's records as the merge passes them on: keys and operation types
    checked, the operation type column required, each retraction and correct-from checked
    against ``state`` (a projection) and the records stored before it (module doc)."""
    from ..data.odf_order import canonical_order

    check_key(table, roles.key, name)
    ops = check_operations(table, roles.observation, name, paired=True)
    if ops is None:
        raise IngestError(f"{name}: a changelog stream gives each record's operation type in "
                          f"column {roles.observation!r} ({OPERATION_TYPES}); it is not in the "
                          f"data (columns: {', '.join(table.column_names)})")
    data = table.drop_columns([roles.observation])
    codes, state_row = _state_rows(state, data, roles.key)
    to = np.flatnonzero(ops == Op.CORRECT_TO)
    if (moved := to[codes[to] != codes[to - 1]]).size:  # a pair corrects one key's record
        row = int(moved[0])
        raise IngestError(f"{name}: row {row + 1}: a correct-to row has the key "
                          f"{_key(data, roles.key, row)} and its correct-from row another "
                          f"({_key(data, roles.key, row - 1)})")
    checked = np.flatnonzero((ops == Op.RETRACT) | (ops == Op.CORRECT_FROM))
    if not checked.size:
        return table
    # per checked row, the record held for its key just before it: the batch's row stored
    # before it, else the state's row (placed after the batch's in ``held_table``)
    before = _before(codes, canonical_order(data, ops, event_time_column, roles.key))[checked]
    in_batch = before >= 0
    held = np.where(in_batch, ops[before] != Op.RETRACT, state_row[checked] >= 0)
    at = np.where(in_batch, before, len(data) + state_row[checked])
    held_table = pa.concat_tables([data, _like(state, data)])
    columns = [c for c in data.column_names if c not in roles.key
               and (c != event_time_column or own_event_time)]
    differs = np.stack([_differs(held_table[c].take(at), data[c].take(checked))
                        for c in columns]) if columns else np.zeros((0, len(checked)), bool)
    bad = ~held | differs.any(axis=0)
    if not bad.any():
        return table
    i = int(np.argmax(bad))
    row = int(checked[i])
    what = f"{name}: row {row + 1}: {'retracts' if ops[row] == Op.RETRACT else 'corrects'} the " \
        f"record of key {_key(data, roles.key, row)}"
    reordered = " (a slice stores a key's records by operation type, appends first, then by " \
        "event time, not in the file's order, as the reference does; put a key's later changes " \
        "in a later file)" \
        if _before(codes, np.arange(len(codes)))[row] != before[i] else ""
    if not held[i]:
        raise IngestError(f"{what}, which the dataset does not hold at that point{reordered}")
    column = columns[int(np.argmax(differs[:, i]))]
    raise IngestError(f"{what} with {column} {_shown(data[column][row])}, but the record held "
                      f"for it has {_shown(held_table[column][int(at[i])])}{reordered}")


def upsert(state: pa.Table | None, batch: pa.Table, roles: SnapshotColumns,
           event_time_column: str, snapshot_time: datetime, name: str,
           own_event_time: bool = False) -> pa.Table:
    """The changes an upsert stream's ``batch`` makes to ``state`` (a projection), as
    operation types (see the module's docstring)."""
    check_key(batch, roles.key, name)
    ops = check_operations(batch, roles.observation, name, paired=False)
    data = batch if ops is None else batch.drop_columns([roles.observation])
    codes, state_row = _state_rows(state, data, roles.key)
    _, from_end = np.unique(codes[::-1], return_index=True)
    last = np.sort(len(codes) - 1 - from_end)  # each key's last record, in batch order
    if ops is not None:
        deletions = np.flatnonzero(ops == Op.RETRACT)
        before = _before(codes, np.arange(len(codes)))[deletions]
        held = np.where(before >= 0, ops[before] != Op.RETRACT, state_row[deletions] >= 0)
        if (unheld := deletions[~held]).size:
            row = int(unheld[0])
            raise IngestError(f"{name}: row {row + 1}: deletes key "
                              f"{_key(data, roles.key, row)}, which the dataset does not hold "
                              "at that point")
        last = last[ops[last] != Op.RETRACT]
    previous = None if state is None else state.take(np.unique(state_row[state_row >= 0]))
    # a deleted key is in ``previous`` and not among the upserts: the snapshot retracts it
    return snapshot(previous, data.take(last), roles, event_time_column, snapshot_time, name,
                    own_event_time)


def _state_rows(state: pa.Table | None, data: pa.Table,
                key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The key codes of ``data``'s rows, and per row the row of ``state`` (a projection: keys
    unique) holding its key, -1 where none does."""
    if state is None:
        codes = key_codes([data], key)[0]
        return codes, np.full(len(codes), -1, dtype=np.int64)
    codes, codes_state = key_codes([data, state], key)
    row_of = np.full(int(max(codes.max(initial=0), codes_state.max(initial=0))) + 1, -1,
                     dtype=np.int64)
    row_of[codes_state] = np.arange(len(codes_state))
    return codes, row_of[codes]


def _before(codes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per row, the row of the record of the same key just before it when the rows are taken
    in ``order`` (a permutation), -1 for a key's first record."""
    by_key = order[np.argsort(codes[order], kind="stable")]  # each key's rows, in ``order``
    before = np.full(len(codes), -1, dtype=np.int64)
    same = codes[by_key[1:]] == codes[by_key[:-1]]
    before[by_key[1:][same]] = by_key[:-1][same]
    return before


def _key(table: pa.Table, key: list[str], row: int) -> dict:
    """The key of ``table``'s row ``row``, for messages."""
    return {k: table[k][row].as_py() for k in key}


def _shown(value: pa.Scalar) -> str:
    """A value for a message: a time as RFC 3339, anything else as Python writes it."""
    v = value.as_py()
    return format_timestamp(v) if isinstance(v, datetime) else repr(v)


def _like(state: pa.Table | None, data: pa.Table) -> pa.Table:
    """``state``'s rows with ``data``'s columns and types (nulls for a column it lacks)."""
    if state is None:
        return data.schema.empty_table()
    return pa.Table.from_arrays([_column_or_nulls(state, f.name, f.type) for f in data.schema],
                                schema=data.schema)


def _check_unique(table: pa.Table, codes: np.ndarray, key: list[str], name: str) -> None:
    counts = np.bincount(codes) if len(codes) else np.zeros(0, dtype=np.int64)
    if len(counts) and counts.max() > 1:
        rows = np.nonzero(codes == int(np.argmax(counts)))[0]
        value = _key(table, key, int(rows[0]))
        raise IngestError(f"{name}: rows {int(rows[0]) + 1} and {int(rows[1]) + 1} have the same "
                          f"primary key {value}; a snapshot holds each key once")


def _column_or_nulls(table: pa.Table, column: str, type_: pa.DataType) -> pa.ChunkedArray:
    if column not in table.column_names:
        return pa.chunked_array([pa.nulls(table.num_rows, type_)], type_)
    col = table.column(column)
    return col if col.type == type_ else col.cast(type_)


def _differs(before: pa.ChunkedArray, after: pa.ChunkedArray) -> np.ndarray:
    """Null-aware inequality (null = null; NaN = NaN), as a numpy bool array."""
    unequal = pc.fill_null(pc.not_equal(before, after), False)
    one_null = pc.xor(pc.is_null(before), pc.is_null(after))
    result = pc.or_(unequal, one_null)
    if pa.types.is_floating(after.type):
        both_nan = pc.fill_null(pc.and_(pc.is_nan(before), pc.is_nan(after)), False)
        result = pc.and_(result, pc.invert(both_nan))
    return np.asarray(pa.chunked_array([result]).to_numpy() if isinstance(result, pa.Array)
                      else result.to_numpy(), dtype=bool)
