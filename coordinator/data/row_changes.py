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
  touched, so a step that changes nothing writes nothing.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa

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


def changes(before: pa.Table, after: pa.Table, op: str) -> pa.Table:
    """The records that take rows ``before`` to rows ``after`` (the same columns), ``after``'s
    schema and an ``op`` column; appends first, then retractions."""
    cols = ", ".join(_quoted(c) for c in after.column_names)
    delta = (f"SELECT {cols}, sum({_S})::BIGINT AS {_N} FROM (SELECT {cols}, 1 AS {_S} FROM after "
             f"UNION ALL BY NAME SELECT {cols}, -1 AS {_S} FROM before) GROUP BY ALL HAVING sum({_S}) <> 0")
    table = _sql(f"SELECT {cols}, CASE WHEN {_N} > 0 THEN {Op.APPEND} ELSE {Op.RETRACT} END AS {_quoted(op)} "
                 f"FROM (SELECT {cols}, {_N}, unnest(range(abs({_N}))) FROM ({delta})) "
                 f"ORDER BY {_quoted(op)}", before=before.select(after.column_names), after=after)
    schema = after.schema.append(pa.field(op, pa.int32(), nullable=False))
    return table.cast(schema)


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
