"""Snapshot merges out of core: the state and the new snapshot as Parquet files, diffed by
DuckDB under a memory limit, spilling under the pull's run folder.

Used when a snapshot is larger than a quarter of ``ingest.maxSliceBytes`` or the state it is
diffed against larger than that limit (``service._Pull``); smaller ones are merged in memory by
``merge.snapshot``. Both give the
same change events in the same order (tests/ingest/test_bounded_memory.py): upserts (``I``,
or ``U`` when a compared column is distinct, null-aware, NaN equal to NaN) in the snapshot's
row order, then removals (``D``, the previous values, event time = the snapshot's time) in
the state's order. Out of core, a change set larger than a quarter slice is committed as
several blocks; every block but the last keeps the source state from before the snapshot, so a pull
stopped between them diffs the same snapshot again against the state the committed blocks
left, which yields exactly the changes not yet committed.

The state is the projection ``merge.projection`` describes, cached in the dataset's cache
folder as the in-memory merge caches it (``DatasetHistory.remember_snapshot_state``): after a
snapshot's blocks it is rebuilt from the cached state and the new slices (``current_state``),
as it is after any stop.

Memory: DuckDB's limit, one piece of the snapshot as read, one slice of changes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..data import parquet_reader
from ..data.odf_slice import Op
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
        # every query orders its rows itself, so DuckDB need not keep insertion order
        self.con = duckdb.connect(config={"memory_limit": f"{max(memory_bytes >> 20, 256)}MiB",
                                          "temp_directory": str(spill),
                                          "preserve_insertion_order": False})
        self.con.execute("SET enable_progress_bar = false")  # on stdout under python -c
        self.state = self.current_state()

    # --- the state ----------------------------------------------------------------------------

    def current_state(self) -> Path | None:
        """The projection of the history as a file: the cached one if current, else the cached
        one (or nothing) with the newer slices projected onto it, cached in its place.

        Its rows keep their order (the cached state's, then the newer slices' in turn), so
        they are copied as they stand, less the rows DuckDB lists as dropped: a row whose key
        a later slice has, or a removal. Only those positions are sorted, not the rows."""
        h = self.history
        if not h.data_blocks:
            return None
        folder = h.projection_dir()
        blocks, cached = h.data_blocks, None
        for i in range(len(h.data_blocks) - 1, -1, -1):
            if h.cached_state(h.data_blocks[i]).exists():
                if i == len(h.data_blocks) - 1:
                    return h.cached_state(h.data_blocks[i])
                cached, blocks = h.cached_state(h.data_blocks[i]), blocks[i + 1:]
                break
        newer = h.files(blocks)
        schema = h.schema()
        assert schema is not None  # the history has slices
        # a row's position: its row in the cached state, or (its slice's number << 40) + its row
        sources = [(cached, 0)] if cached is not None else []
        sources += [(path, (i + 1) << 40) for i, path in enumerate(newer)]
        observed = self.roles.ops or self.roles.observation in schema.names
        sql, params = self._dropped_sql(newer, cached, observed)
        dropped = _Positions(self.con.sql(sql, params=params).to_arrow_reader(1 << 16))
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / "state.tmp"  # beside the cache, so installing it is a rename
        # read only by the merges, which join and never filter: no dictionary and no statistics
        # (they cost the write twice its time)
        with pq.ParquetWriter(tmp, schema, use_dictionary=False, write_statistics=False) as writer:
            for path, base in sources:
                for batch in parquet_reader(path).iter_batches(1 << 16):
                    rows = batch.num_rows
                    gone = dropped.below(base + rows) - base
                    if len(gone):
                        keep = np.ones(rows, dtype=bool)
                        keep[gone] = False
                        batch = batch.filter(pa.array(keep))
                    writer.write_table(_conform(batch, schema))
                    base += rows
        self.state = h.install_snapshot_state(tmp)
        return self.state

    def _dropped_sql(self, newer: list[Path], cached: Path | None,
                     observed: bool) -> tuple[str, list]:
        """The positions of the rows the state leaves out, in order: rows of the newer slices
        followed by a row of their key, removals, and cached rows whose key a newer slice has."""
        files = ", ".join(_sql_text(str(p)) for p in newer)
        hist = (f"(SELECT *, ((file_index + 1)::BIGINT << 40) + file_row_number AS {_POS} "
                f"FROM read_parquet([{files}], union_by_name=true, file_row_number=true))")
        key = ", ".join(_q(k) for k in self.roles.key)
        on = " AND ".join(f"h.{_q(k)} = l.{_q(k)}" for k in self.roles.key)
        # only keys given more than once need their rows compared
        again = f"(SELECT {key}, max({_POS}) AS {_POS} FROM {hist} GROUP BY {key} HAVING count(*) > 1)"
        sql = f"SELECT h.{_POS} FROM {hist} h JOIN {again} l ON {on} AND h.{_POS} < l.{_POS}"
        params = []
        if observed:
            sql += f" UNION ALL SELECT {_POS} FROM {hist} WHERE {_q(self.roles.observation)} = $1"
            params = [self.roles.removed]
        if cached is not None:
            sql += (f" UNION ALL SELECT h.file_row_number FROM read_parquet({_sql_text(str(cached))}, "
                    f"file_row_number=true) h WHERE EXISTS (SELECT 1 FROM {hist} l WHERE {on})")
        return f"SELECT * FROM ({sql}) ORDER BY 1", params

    # --- one snapshot -------------------------------------------------------------------------

    def diff(self, tables: Iterator[pa.Table], event_time_column: str,
             snapshot_time: Callable[[], datetime], name: str, batch_bytes: int,
             own_event_time: Callable[[], bool]) -> Iterator[pa.Table]:
        """The change events turning the state into the snapshot read as ``tables``, in
        tables of about ``batch_bytes`` (a correction's two records in one). Call
        ``current_state`` once they are committed. Once ``tables`` are read:
        ``own_event_time``, whether they had their own event time (``merge.compare_columns``);
        ``snapshot_time``, the event time of a 0.18 removal (``D``)."""
        current = self.scratch / "snapshot.parquet"
        schema, rows = self._write_snapshot(tables, current, name)
        compare = compare_columns(schema, self.roles, event_time_column, name, own_event_time())
        cur = f"(SELECT * FROM read_parquet({_sql_text(str(current))}))"
        target = pa.schema([pa.field(self.roles.observation, self.roles.observation_type), *schema])
        batches: Iterable[pa.RecordBatch]
        if self.state is None:  # everything is new, in the snapshot's order: no query
            self._check_unique(cur, name)
            added = pa.scalar(self.roles.added, self.roles.observation_type)
            batches = (pa.RecordBatch.from_arrays([pa.repeat(added, b.num_rows), *b.columns],
                                                  names=target.names)
                       for b in parquet_reader(current).iter_batches(1 << 16, columns=schema.names))
        else:
            batches = self._changes(cur, rows, schema, compare, event_time_column, name)
        i = target.get_field_index(event_time_column)
        pending: list[pa.Table] = []
        size = 0
        for batch in batches:
            table = _conform(batch, target)
            removed = pc.equal(table.column(0), self.roles.removed)
            if not self.roles.ops and pc.any(removed).as_py():  # a removal's time: the snapshot's
                times = pc.if_else(removed, pa.scalar(snapshot_time(), target.field(i).type),
                                           table.column(i))
                table = table.set_column(i, target.field(i), times)
            pending.append(table)
            size += table.nbytes
            if size >= batch_bytes:
                ready = pa.concat_tables(pending)
                # a correct-from record goes with its correct-to, the next batch's first
                cut = len(ready) - (self.roles.ops and ready[0][-1].as_py() == int(Op.CORRECT_FROM))
                yield ready.slice(0, cut)
                pending = [ready.slice(cut)] if cut < len(ready) else []
                size = sum(t.nbytes for t in pending)
        if pending or not size:
            yield pa.concat_tables(pending) if pending else target.empty_table()

    def _changes(self, cur: str, rows: int, schema: pa.Schema, compare: list[str],
                 event_time_column: str, name: str) -> Iterator[pa.RecordBatch]:
        """The change events against the state, in order: one full outer join of the snapshot
        ``cur`` (``rows`` rows) and the state, kept in a DuckDB table (spilling) until the
        snapshot's keys are known to be unique.

        That check needs no pass over the snapshot of its own: with the state's keys unique,
        the snapshot's are too exactly when no key occurs twice among the changes (a key new
        twice is two inserts) and every state row kept has one partner (a key given twice
        joins its state row twice): rows - inserts = state rows - removals."""
        obs = _q(self.roles.observation)
        prev = (f"(SELECT *, file_row_number AS {_POS} FROM read_parquet("
                f"{_sql_text(str(self.state))}, file_row_number=true))")
        state = pq.read_metadata(self.state)
        prev_names = state.schema.to_arrow_schema().names
        on = " AND ".join(f"c.{_q(k)} = p.{_q(k)}" for k in self.roles.key)
        distinct = " OR ".join(f"c.{_q(c)} IS DISTINCT FROM p.{_q(c)}" if c in prev_names
                               else f"c.{_q(c)} IS NOT NULL" for c in compare) or "false"
        gone = f"c.{_ROW} IS NULL"  # a state row without a partner: a removal
        # a 0.39 retraction keeps its event time; a 0.18 removal gets the snapshot's (``diff``)
        values = ", ".join(
            f"CASE WHEN {gone} THEN p.{_q(f.name)} ELSE c.{_q(f.name)} END AS {_q(f.name)}"
            if f.name in prev_names and (f.name != event_time_column or self.roles.ops)
            else f"c.{_q(f.name)}" for f in schema)
        key = ", ".join(_q(k) for k in self.roles.key)
        # upserts in the snapshot's order, then removals in the state's (positions < 2^62)
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE changes AS SELECT CASE WHEN {gone} THEN $3 WHEN "
            f"p.{_POS} IS NULL THEN $1 ELSE $2 END AS {obs}, {values}, "
            f"coalesce(c.{_ROW}, (1::BIGINT << 62) + p.{_POS}) AS {_POS} "
            f"FROM {cur} c FULL OUTER JOIN {prev} p ON {on} "
            f"WHERE {gone} OR p.{_POS} IS NULL OR ({distinct})",
            [self.roles.added, self.roles.changed, self.roles.removed]).fetchall()
        [(inserts, removals, twice)] = self.con.execute(
            f"SELECT count(*) FILTER (WHERE {obs} = $1), count(*) FILTER (WHERE {obs} = $2), "
            f"(SELECT count(*) FROM (SELECT 1 FROM changes GROUP BY {key} HAVING count(*) > 1)) "
            f"FROM changes", [self.roles.added, self.roles.removed]).fetchall()
        if twice or rows - inserts != state.num_rows - removals:
            self._check_unique(cur, name)  # names the rows
            raise IngestError(f"{name}: the cached snapshot state {self.state} holds a key "
                              "twice; delete it and pull again (it is rebuilt from the data)")
        if self.roles.ops:  # each correct-to record's correct-from, the state's row, before it
            previous = ", ".join(f"p.{_q(f.name)}" if f.name in prev_names
                                 else f"NULL AS {_q(f.name)}" for f in schema)
            self.con.execute(
                f"INSERT INTO changes SELECT $1, {previous}, c.{_POS} FROM changes c "
                f"JOIN {prev} p ON {on} WHERE c.{obs} = $2",
                [int(Op.CORRECT_FROM), self.roles.changed]).fetchall()
        yield from self.con.sql(f"SELECT * EXCLUDE ({_POS}) FROM changes ORDER BY {_POS}, {obs}"
                                ).to_arrow_reader(1 << 16)
        self.con.execute("DROP TABLE changes")

    def _write_snapshot(self, tables: Iterator[pa.Table], path: Path,
                        name: str) -> tuple[pa.Schema, int]:
        """The snapshot's rows as a Parquet file, with their positions; returns their schema
        and number."""
        writer, rows, schema = None, 0, None
        try:
            for table in tables:
                check_key(table, self.roles.key, name, rows)
                if schema is None:
                    schema = table.schema
                    # scratch, read once: written as fast as Parquet writes
                    writer = pq.ParquetWriter(path, schema.append(pa.field(_ROW, pa.int64())),
                                              compression="none", use_dictionary=False,
                                              write_statistics=False)
                positions = pa.array(np.arange(rows, rows + table.num_rows, dtype=np.int64))
                assert writer is not None
                writer.write_table(_conform(table, schema).append_column(_ROW, positions))
                rows += table.num_rows
        finally:
            if writer is not None:
                writer.close()
        assert schema is not None  # a file reads as one table at least
        return schema, rows

    def _check_unique(self, cur: str, name: str) -> None:
        key = ", ".join(_q(k) for k in self.roles.key)
        twice = self.con.execute(
            f"SELECT {key}, min({_ROW}) FROM {cur} GROUP BY {key} HAVING count(*) > 1 "
            f"ORDER BY min({_ROW}) LIMIT 1").fetchone()
        if twice is not None:
            *values, first = twice
            match = " AND ".join(f"{_q(k)} = ${i + 2}" for i, k in enumerate(self.roles.key))
            second = self.con.execute(f"SELECT min({_ROW}) FROM {cur} WHERE {_ROW} > $1 AND {match}",
                                      [first, *values]).fetchone()
            assert second is not None
            value = dict(zip(self.roles.key, values, strict=True))
            raise IngestError(f"{name}: rows {first + 1} and {second[0] + 1} have the same primary "
                              f"key {value}; a snapshot holds each key once")

    def close(self) -> None:
        self.con.close()


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class _Positions:
    """Ascending positions read from a stream of one-column batches, handed out in turn."""

    def __init__(self, reader: pa.RecordBatchReader):
        self.reader, self.held = reader, np.empty(0, dtype=np.int64)

    def below(self, limit: int) -> np.ndarray:
        """The positions not handed out yet that are less than ``limit``."""
        while not len(self.held) or self.held[-1] < limit:
            try:
                batch = self.reader.read_next_batch()
            except StopIteration:
                break
            self.held = np.concatenate([self.held, batch.column(0).to_numpy()])
        cut = int(np.searchsorted(self.held, limit))
        taken, self.held = self.held[:cut], self.held[cut:]
        return taken


def _conform(rows: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """Rows in ``schema``, columns taken by name: DuckDB's Arrow types (its time zone, plain
    strings) and older slices' types cast to the dataset's, columns added since as nulls."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    if table.schema.equals(schema):
        return table
    names = table.schema.names
    return pa.Table.from_arrays(
        [table.column(f.name).cast(f.type) if f.name in names
         else pa.nulls(table.num_rows, f.type) for f in schema], schema=schema)
