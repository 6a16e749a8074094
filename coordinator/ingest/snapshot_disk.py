"""Snapshot merges out of core: the state and the new snapshot as Parquet files, diffed by
DuckDB under a memory limit, spilling under the pull's run folder.

Used when a snapshot or the state it is diffed against is larger than ``ingest.maxSliceBytes``
(``service._Pull``); smaller ones are merged in memory by ``merge.snapshot``. Both give the
same change events in the same order, so the same blocks and hashes (tests/ingest/
test_bounded_memory.py): upserts (``I``, or ``U`` when a compared column is distinct,
null-aware, NaN equal to NaN) in the snapshot's row order, then removals (``D``, the previous
values, event time = the snapshot's time) in the state's order. The state is the projection
that ``merge.projection`` describes, kept in the dataset's cache folder as the in-memory merge
keeps it (``DatasetHistory.remember_snapshot_state``), and rewritten after each block from
the state and the block, in that order: kept rows first, then the block's new and changed.

Memory: DuckDB's limit, the snapshot's pieces as read, and the change set of one block
(which, unlike the state, is held whole: it is one slice).
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import IngestError
from .history import DatasetHistory
from .merge import SnapshotColumns, check_key, compare_columns

_ROW = "__coord_row"  # a snapshot row's position in its file
_POS = "__coord_pos"  # a state row's position in the state file


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DiskSnapshot:
    """One pull's out-of-core snapshot merges, against a state file it keeps current."""

    def __init__(self, history: DatasetHistory, roles: SnapshotColumns, scratch: Path,
                 memory_bytes: int):
        import duckdb

        self.history, self.roles, self.scratch = history, roles, scratch
        spill = scratch / "duckdb"
        spill.mkdir(exist_ok=True)
        self.con = duckdb.connect(config={"memory_limit": f"{max(memory_bytes >> 20, 64)}MiB",
                                          "temp_directory": str(spill),
                                          "preserve_insertion_order": True})
        self.state: Path | None = self._state_file()

    # --- the state ----------------------------------------------------------------------------

    def _state_file(self) -> Path | None:
        """The projection of the history as a file: the cached one if current, else the cached
        one (or nothing) with the newer slices projected onto it."""
        h = self.history
        if not h.data_blocks:
            return None
        folder = h.projection_dir()
        parts = [h.ds.data_file(b) for b in h.data_blocks]
        for i in range(len(h.data_blocks) - 1, -1, -1):
            cached = folder / f"{h.data_blocks[i].hex()}.parquet"
            if cached.exists():
                if i == len(h.data_blocks) - 1:
                    return cached
                parts = [cached, *parts[i + 1:]]
                break
        part_index = ", ".join(f"({_sql_text(str(p))}, {k})" for k, p in enumerate(parts))
        files = ", ".join(_sql_text(str(p)) for p in parts)
        key = ", ".join(_q(k) for k in self.roles.key)
        latest = (f"SELECT h.*, row_number() OVER (PARTITION BY {key} ORDER BY i.k DESC, "
                  f"h.file_row_number DESC) AS __coord_rn, i.k AS __coord_part "
                  f"FROM read_parquet([{files}], union_by_name=true, filename=true, "
                  f"file_row_number=true) h JOIN (VALUES {part_index}) i(f, k) ON h.filename = i.f")
        kept = "__coord_rn = 1"
        schema = h.schema()
        assert schema is not None  # the history has slices
        if self.roles.observation in schema.names:
            kept += f" AND coalesce({_q(self.roles.observation)} <> $1, true)"
        columns = ", ".join(_q(n) for n in schema.names)
        return self._write_state(f"SELECT {columns} FROM ({latest}) WHERE {kept} "
                                 f"ORDER BY __coord_part, file_row_number",
                                 [self.roles.removed] if "$1" in kept else [], schema)

    def _write_state(self, sql: str, params: list, schema: pa.Schema) -> Path:
        """Stream the rows of ``sql`` into the cache folder as the newest block's state."""
        folder = self.history.projection_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{self.history.data_blocks[-1].hex()}.parquet"
        tmp = self.scratch / "state.parquet"
        reader = self.con.sql(sql, params=params).to_arrow_reader(1 << 16)
        assert reader is not None
        with pq.ParquetWriter(tmp, schema) as writer:
            for batch in reader:
                writer.write_table(_cast(pa.Table.from_batches([batch]), schema))
        tmp.replace(target)
        for old in folder.iterdir():
            if old != target:
                old.unlink(missing_ok=True)
        return target

    def _state_view(self) -> tuple[str, list[str]]:
        """The state as a relation with positions, and its columns."""
        if self.state is None:
            return "", []
        path = _sql_text(str(self.state))
        names = pq.read_schema(self.state).names
        return (f"(SELECT *, file_row_number AS {_POS} FROM read_parquet({path}, "
                f"file_row_number=true))", names)

    # --- one snapshot -------------------------------------------------------------------------

    def diff(self, tables: Iterator[pa.Table], event_time_column: str, snapshot_time: datetime,
             name: str) -> pa.Table:
        """The change events turning the state into the snapshot read as ``tables``."""
        current = self.scratch / "snapshot.parquet"
        schema = self._write_snapshot(tables, current, name)
        compare = compare_columns(schema, self.roles, event_time_column, name)
        prev, prev_names = self._state_view()
        cur = f"(SELECT * FROM read_parquet({_sql_text(str(current))}))"
        self._check_unique(cur, name)
        on = " AND ".join(f"c.{_q(k)} = p.{_q(k)}" for k in self.roles.key)
        distinct = " OR ".join(f"c.{_q(c)} IS DISTINCT FROM p.{_q(c)}" if c in prev_names
                               else f"c.{_q(c)} IS NOT NULL" for c in compare) or "false"
        target = pa.schema([pa.field(self.roles.observation, pa.string()), *schema])
        if self.state is None:  # everything is new
            prev = f"(SELECT {', '.join(f'NULL AS {_q(k)}' for k in self.roles.key)}, " \
                   f"NULL AS {_POS} WHERE false)"
        upserts = self.con.sql(
            f"SELECT CASE WHEN p.{_POS} IS NULL THEN $1 ELSE $2 END AS {_q(self.roles.observation)}, "
            f"{', '.join('c.' + _q(f.name) for f in schema)} FROM {cur} c LEFT JOIN {prev} p ON {on} "
            f"WHERE p.{_POS} IS NULL OR ({distinct}) ORDER BY c.{_ROW}",
            params=[self.roles.added, self.roles.changed]).to_arrow_table()
        assert upserts is not None
        parts = [_cast(upserts, target)]
        if self.state is not None:
            values = ", ".join(f"p.{_q(f.name)}" if f.name in prev_names and f.name != event_time_column
                               else f"NULL AS {_q(f.name)}" for f in schema)
            removed = self.con.sql(
                f"SELECT $1 AS {_q(self.roles.observation)}, {values} FROM {prev} p "
                f"WHERE NOT EXISTS (SELECT 1 FROM {cur} c WHERE {on}) ORDER BY p.{_POS}",
                params=[self.roles.removed]).to_arrow_table()
            assert removed is not None
            if removed.num_rows:
                removed = _cast(removed, target)
                i = target.get_field_index(event_time_column)
                removed = removed.set_column(i, target.field(i), pa.repeat(
                    pa.scalar(snapshot_time, target.field(i).type), removed.num_rows))
                parts.append(removed)
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _write_snapshot(self, tables: Iterator[pa.Table], path: Path, name: str) -> pa.Schema:
        """The snapshot's rows as a Parquet file, with their positions; returns their schema."""
        writer, rows, schema = None, 0, None
        try:
            for table in tables:
                check_key(table, self.roles.key, name, rows)
                if schema is None:
                    schema = table.schema
                    writer = pq.ParquetWriter(path, schema.append(pa.field(_ROW, pa.int64())))
                positions = pa.array(np.arange(rows, rows + table.num_rows, dtype=np.int64))
                assert writer is not None
                writer.write_table(_cast(table, schema).append_column(_ROW, positions))
                rows += table.num_rows
        finally:
            if writer is not None:
                writer.close()
        assert schema is not None  # a file reads as one table at least
        return schema

    def _check_unique(self, cur: str, name: str) -> None:
        key = ", ".join(_q(k) for k in self.roles.key)
        twice = self.con.execute(
            f"SELECT min({_ROW}), max({_ROW}) FROM (SELECT {key}, {_ROW}, row_number() OVER "
            f"(PARTITION BY {key} ORDER BY {_ROW}) AS n FROM {cur}) WHERE n <= 2 GROUP BY {key} "
            f"HAVING count(*) > 1 ORDER BY 1 LIMIT 1").fetchone()
        if twice is not None:
            first, second = twice
            row = self.con.execute(f"SELECT {key} FROM {cur} WHERE {_ROW} = $1", [first]).fetchone()
            value = dict(zip(self.roles.key, row or (), strict=True))
            raise IngestError(f"{name}: rows {first + 1} and {second + 1} have the same primary "
                              f"key {value}; a snapshot holds each key once")

    def advance(self, committed: pa.Table) -> None:
        """The state after a block: kept rows of the state, then the block's non-removed rows."""
        schema = committed.schema
        self.con.register("coord_block", committed.append_column(
            _POS, pa.array(np.arange(committed.num_rows, dtype=np.int64))))
        try:
            obs = _q(self.roles.observation)
            parts = [f"SELECT {', '.join(f'c.{_q(n)}' for n in schema.names)}, 1 AS g, c.{_POS} AS o "
                     f"FROM coord_block c WHERE coalesce(c.{obs} <> $1, true)"]
            prev, prev_names = self._state_view()
            if prev:
                on = " AND ".join(f"c.{_q(k)} = p.{_q(k)}" for k in self.roles.key)
                kept = ", ".join(f"p.{_q(n)}" if n in prev_names else f"NULL AS {_q(n)}"
                                 for n in schema.names)
                parts.insert(0, f"SELECT {kept}, 0 AS g, p.{_POS} AS o FROM {prev} p WHERE NOT "
                                f"EXISTS (SELECT 1 FROM coord_block c WHERE {on})")
            sql = f"SELECT * EXCLUDE (g, o) FROM ({' UNION ALL '.join(parts)}) ORDER BY g, o"
            self.state = self._write_state(sql, [self.roles.removed], schema)
        finally:
            self.con.unregister("coord_block")

    def close(self) -> None:
        self.con.close()


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _cast(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """DuckDB's Arrow types (its time zone, plain strings) back to the dataset's."""
    if table.schema.equals(schema):
        return table
    return pa.Table.from_arrays([table.column(i).cast(f.type) for i, f in enumerate(schema)],
                                schema=schema)
