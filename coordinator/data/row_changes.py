"""The rows a change log describes, and the change log that turns one set of rows into another.

ODF's rule (Representation of Retractions and Corrections): an append or a correct-to adds a
row, a retraction or a correct-from takes one away. ``current_rows`` folds a dataset's records
into the rows they describe (``write_row_counts`` and ``write_counted_rows`` the same from
files to files, a fold brought forward by newer records); ``changes`` writes the records that
take rows ``before`` to rows ``after``. All are DuckDB over Arrow tables or Parquet files (no
Python loop per row); over files, under a memory limit, spilling to disk past it.

Invariants:

- Rows are a multiset of whole rows: every column but the system columns (offset, op, system
  time) counts, the event time included; two equal rows are two rows (a duplicate appended
  twice is held twice). Nulls equal nulls, as a record's retraction repeats its nulls.
- A row is held as many times as its records' effects add up to (appends and correct-tos +1,
  retractions and correct-froms -1), not at all when that is below one. Sums do not depend on
  the order or grouping of the records, so a fold kept and brought forward gives what one
  fold of the whole log gives.
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
from typing import TypeAlias

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from .odf_slice import Op, Vocabulary

Rows: TypeAlias = pa.Table | pads.Dataset  # rows DuckDB scans: in memory, or files read as it goes

# names of the counts the queries compute, beside the rows' own columns (which they must not
# shadow: GROUP BY ALL would group by a column of the same name)
_N, _S = '"__odf_rows_count"', '"__odf_rows_sign"'
# what a fold or a comparison of rows may hold in memory before DuckDB spills to disk: rows
# held are bounded by the disk, not by the machine's memory
FOLD_MEMORY = "256MiB"


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
    along the way read null before), written to ``target``."""
    counts = target.with_name(target.name + ".counts")
    write_row_counts(files, v, counts)
    write_counted_rows(counts, target)
    counts.unlink()


def write_row_counts(files: list[Path], v: Vocabulary, target: Path, *, base: Path | None = None,
                     spill: Path | None = None) -> None:
    """The rows the records in ``files`` (one dataset's Parquet slices, in any order; columns
    added along the way read null before) describe, each distinct row once with its count, the
    sum of its records' effects (never 0; below 0 when retracted more often than added, so a
    later append evens it out as folding the whole log at once would), added to the counts in
    ``base`` (a file this wrote for the records before ``files``), written to ``target``.

    DuckDB reads the files itself under a memory limit, spilling into ``spill`` (default: beside
    ``target``). With a
    ``base``, only its rows the new records touch are aggregated (a join on every column, nulls
    equal): memory follows the new records, not the rows held."""
    schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
    columns = [f for f in schema if f.name not in (v.offset, v.operation_type, v.system_time)]
    cols = ", ".join(_quoted(c.name) for c in columns)
    sign = sign_sql(_quoted(v.operation_type)) if v.operation_type in schema.names else "1"
    new = (f"SELECT {cols}, sum({sign})::BIGINT AS {_N} FROM "
           f"read_parquet({[str(f) for f in files]!r}, union_by_name = true) GROUP BY ALL")
    if base is None:
        query = f"SELECT * FROM ({new}) WHERE {_N} <> 0"
    else:
        same = " AND ".join(f"b.{_quoted(c.name)} IS NOT DISTINCT FROM d.{_quoted(c.name)}" for c in columns)
        # the base's rows in the new records' columns (one added since reads null)
        held = f"SELECT {cols}, {_N} FROM (FROM read_parquet('{base}') UNION ALL BY NAME FROM d WHERE false)"
        query = (f"WITH d AS ({new}), b AS ({held}) "
                 f"SELECT b.* FROM b ANTI JOIN d ON {same} UNION ALL "
                 f"SELECT {cols}, sum({_N})::BIGINT AS {_N} FROM "
                 f"(SELECT b.* FROM b SEMI JOIN d ON {same} UNION ALL SELECT * FROM d) "
                 f"GROUP BY ALL HAVING sum({_N}) <> 0")
    _write(query, [*columns, pa.field(_N.strip('"'), pa.int64())], target, spill or target.parent)


def write_counted_rows(counts: Path, target: Path) -> None:
    """The rows a file of ``write_row_counts`` describes, each as many times as its count says
    (none below 1), written to ``target``."""
    columns = [f for f in pq.read_schema(counts) if f.name != _N.strip('"')]
    cols = ", ".join(_quoted(c.name) for c in columns)
    _write(f"SELECT {cols} FROM (SELECT {cols}, unnest(range({_N})) FROM read_parquet('{counts}') "
           f"WHERE {_N} > 0)", columns, target, target.parent)


def _write(query: str, columns: list[pa.Field], target: Path, spill: Path) -> None:
    """The rows of ``query`` (DuckDB SQL, reading files itself) written to ``target`` in
    ``columns``' types, batch by batch; DuckDB spills into ``spill`` past its memory limit."""
    out = pa.schema(columns)
    con = _connect(spill)
    try:
        reader = con.sql(query).to_arrow_reader()
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


def changes(before: Rows, after: Rows, op: str, key: tuple[str, ...] = (), *,
            spill: Path | None = None) -> pa.Table:
    """The records that take rows ``before`` to rows ``after`` (tables or Arrow datasets DuckDB
    scans, of the same columns), ``after``'s schema and an ``op`` column. Where ``key`` names
    columns, a row taken away and a row added that share them, alone on each side, are written
    as a correct-from / correct-to pair, the correct-from first (the reference's update of a
    row); every other change is a retraction or an append. Past its memory limit DuckDB spills
    into ``spill``."""
    cols = ", ".join(_quoted(c) for c in after.schema.names)
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
    table = _sql(f"{records} ORDER BY {order}", spill=spill, before=before, after=after)
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


def _sql(query: str, *, spill: Path | None = None, **tables: Rows) -> pa.Table:
    con = _connect(spill)
    try:
        for name, table in tables.items():
            con.register(name, table)
        return con.sql(query).to_arrow_table()
    finally:
        con.close()


def _connect(spill: Path | None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection in UTC; given ``spill``, under the fold's memory limit, spilling
    there past it (without, DuckDB's own limit: tables already in memory)."""
    bounded = {"memory_limit": FOLD_MEMORY, "temp_directory": str(spill / "duckdb")} if spill else {}
    con = duckdb.connect(config={"preserve_insertion_order": False, **bounded})
    con.execute("SET TimeZone = 'UTC'")
    return con


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
