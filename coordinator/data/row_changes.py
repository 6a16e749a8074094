"""The rows a change log describes, and the change log that turns one set of rows into another.

ODF's rule (Representation of Retractions and Corrections): an append or a correct-to adds a
row, a retraction or a correct-from takes one away. ``current_rows`` folds a dataset's records
into the rows they describe; ``changes`` writes the records that take rows ``before`` to rows
``after``. Both are DuckDB over Arrow tables (no Python loop per row).

Invariants:

- Rows are a multiset of whole rows: every column but the system columns (offset, op, system
  time) counts, the event time included; two equal rows are two rows (a duplicate appended
  twice is held twice). Nulls equal nulls, as a record's retraction repeats its nulls.
- A retraction of a row not held takes nothing away (the folded count never goes below zero).
- ``changes(before, after)`` folded onto ``before`` gives ``after``: each row held more times
  after than before is appended that many more times (op 0), each held fewer times is
  retracted (op 1), carrying the values of the row it takes away, its event time included
  (as the reference writes retractions). Nothing else is written: a row in both is not
  touched, so a step that changes nothing writes nothing. Given key columns, a row taken away
  and one added with the same key (and no other change under it) are one correct-from /
  correct-to pair instead: the same rows, written as the reference writes an update.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .odf_slice import Op, Vocabulary

# names of the counts the queries compute, beside the rows' own columns (which they must not
# shadow: GROUP BY ALL would group by a column of the same name)
_N, _S = '"__odf_rows_count"', '"__odf_rows_sign"'


def sign_sql(op: str) -> str:
    """The SQL of a record's effect on the rows (ODF's rule, the module's invariants): +1 for an
    append or a correct-to in the quoted column ``op``, -1 for a retraction or a correct-from."""
    return f"CASE WHEN {op} IN ({int(Op.APPEND)}, {int(Op.CORRECT_TO)}) THEN 1 ELSE -1 END"


def current_rows(records: pa.Table, v: Vocabulary) -> pa.Table:
    """The rows ``records`` (one dataset's, in any order) describe, without the system columns;
    in no particular order."""
    columns = [c for c in records.column_names if c not in (v.offset, v.operation_type, v.system_time)]
    if v.operation_type not in records.column_names:
        return records.select(columns)
    cols = ", ".join(_quoted(c) for c in columns)
    sign = sign_sql(_quoted(v.operation_type))
    return _sql(f"SELECT {cols} FROM (SELECT {cols}, unnest(range({_N})) FROM "
                f"(SELECT {cols}, sum({sign})::BIGINT AS {_N} FROM records GROUP BY ALL) WHERE {_N} > 0)",
                records=records).cast(records.select(columns).schema)


def write_current_rows(files: list[Path], v: Vocabulary, target: Path) -> None:
    """``current_rows`` of the records in ``files`` (one dataset's Parquet slices, columns added
    along the way read null before), written to ``target``: DuckDB reads and folds the files
    itself, so memory follows the rows held, not the length of the change log."""
    schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
    columns = [f for f in schema if f.name not in (v.offset, v.operation_type, v.system_time)]
    out = pa.schema(columns)
    cols = ", ".join(_quoted(c.name) for c in columns)
    source = f"read_parquet({[str(f) for f in files]!r}, union_by_name = true)"
    if v.operation_type in schema.names:
        sign = sign_sql(_quoted(v.operation_type))
        query = (f"SELECT {cols} FROM (SELECT {cols}, unnest(range({_N})) FROM (SELECT {cols}, "
                 f"sum({sign})::BIGINT AS {_N} FROM {source} GROUP BY ALL) WHERE {_N} > 0)")
    else:
        query = f"SELECT {cols} FROM {source}"
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        reader = con.sql(query).fetch_record_batch()
        with pq.ParquetWriter(target, out) as writer:
            for batch in reader:
                writer.write_batch(pa.RecordBatch.from_arrays(
                    [batch.column(k).cast(c.type) for k, c in enumerate(columns)], schema=out))
    finally:
        con.close()


def standing(records: pa.Table, v: Vocabulary) -> pa.Array:
    """Which of ``records`` (one dataset's, with their offsets) stand for the rows they describe:
    of a row held k times, the k newest appends or correct-tos that added it (by offset); a
    boolean per record, in ``records``' order. What ``current_rows`` gives, with the records
    behind each row (a recomputed derivative's provenance)."""
    columns = [c for c in records.column_names if c not in (v.offset, v.operation_type, v.system_time)]
    if v.operation_type not in records.column_names:
        return pa.array(np.ones(records.num_rows, dtype=bool))
    cols = ", ".join(_quoted(c) for c in columns) or "NULL"
    op, at = _quoted(v.operation_type), '"__odf_position"'
    adds = f"{op} IN ({int(Op.APPEND)}, {int(Op.CORRECT_TO)})"
    numbered = records.append_column("__odf_position", pa.array(np.arange(records.num_rows, dtype=np.int64)))
    held = f"sum({sign_sql(op)}) OVER (PARTITION BY {cols}) AS {_N}"
    newest = f"row_number() OVER (PARTITION BY {cols}, {adds} ORDER BY {_quoted(v.offset)} DESC) AS rn"
    kept = _sql(f"SELECT {at} FROM (SELECT {at}, {adds} AS adds, {held}, {newest} FROM records) "
                f"WHERE adds AND rn <= {_N}", records=numbered)
    mask = np.zeros(records.num_rows, dtype=bool)
    mask[kept.column(0).to_numpy()] = True
    return pa.array(mask)


def changes(before: pa.Table, after: pa.Table, op: str, key: tuple[str, ...] = ()) -> pa.Table:
    """The records that take rows ``before`` to rows ``after`` (the same columns), ``after``'s
    schema and an ``op`` column. Where ``key`` names columns, a row taken away and a row added
    that share them, alone on each side, are written as a correct-from / correct-to pair, the
    correct-from first (the reference's update of a row); every other change is a retraction
    or an append."""
    cols = ", ".join(_quoted(c) for c in after.column_names)
    delta = (f"SELECT {cols}, sum({_S})::BIGINT AS {_N} FROM (SELECT {cols}, 1 AS {_S} FROM after "
             f"UNION ALL BY NAME SELECT {cols}, -1 AS {_S} FROM before) GROUP BY ALL HAVING sum({_S}) <> 0")
    records = (f"SELECT {cols}, CASE WHEN {_N} > 0 THEN {Op.APPEND} ELSE {Op.RETRACT} END AS {_quoted(op)} "
               f"FROM (SELECT {cols}, {_N}, unnest(range(abs({_N}))) FROM ({delta}))")
    if key:
        keys = ", ".join(_quoted(c) for c in key)
        sides = (f"count(*) FILTER ({_quoted(op)} = {Op.APPEND}) OVER k = 1 AND "
                 f"count(*) FILTER ({_quoted(op)} = {Op.RETRACT}) OVER k = 1")
        pair = f"CASE WHEN {_quoted(op)} = {Op.APPEND} THEN {Op.CORRECT_TO} ELSE {Op.CORRECT_FROM} END"
        records = (f"SELECT {cols}, CASE WHEN {sides} THEN {pair} ELSE {_quoted(op)} END AS {_quoted(op)} "
                   f"FROM ({records}) WINDOW k AS (PARTITION BY {keys})")
        order = f"{keys}, {_quoted(op)}"  # a pair's two records next to each other, from first
    else:
        order = _quoted(op)
    table = _sql(f"{records} ORDER BY {order}", before=before.select(after.column_names), after=after)
    schema = after.schema.append(pa.field(op, pa.int32(), nullable=False))
    return table.cast(schema)


def unpaired(records: pa.Table, op: str) -> pa.Table:
    """``records`` with each correct-from written as a retraction and each correct-to as an
    append: the same rows, as a recomputed step wrote them before it wrote pairs."""
    ops = records[op]
    plain = pc.if_else(pc.equal(ops, int(Op.CORRECT_FROM)), int(Op.RETRACT),
                       pc.if_else(pc.equal(ops, int(Op.CORRECT_TO)), int(Op.APPEND), ops))
    column = records.schema.get_field_index(op)
    return records.set_column(column, records.schema.field(column), plain.cast(ops.type))


def _sql(query: str, **tables: pa.Table) -> pa.Table:
    con = duckdb.connect()
    try:
        for name, table in tables.items():
            con.register(name, table)
        return con.sql(query).to_arrow_table()
    finally:
        con.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
