"""Logical hashes of 0.18 data slices (profile: ``schemas/DATA-HASHING.md``); the physical
hash, SHA3-256 of a file's bytes, is ``workspace.fsutil.physical_hash``.

The logical hash must not depend on how a slice happens to be stored (row order, chunking,
Parquet encoding), so it hashes a canonical text of the rows instead of the file bytes:

    every value → canonical text; a row = its columns (schema order, ``system_time`` dropped)
    joined by ``\\t`` and ended by ``\\n``; rows sorted by event time, then by their bytes;
    SHA3-256 of the concatenation.

Values are rendered column by column (``canonical.render``); this module orders the rows,
joins each row's values and hashes the result. Python only loops over columns and batches,
never over rows. The sorted rows are Arrow string arrays whose values buffer *is* the
concatenated text, so it goes straight into hashlib without copying.
"""
from __future__ import annotations

import hashlib
import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from . import parquet_reader, validity
from .canonical import UnsupportedValueError, append_text, numpy_values, offsets_and_data, render

__all__ = [
    "UnsupportedValueError", "canonical_rows", "canonical_text", "file_logical_hash",
    "logical_hash", "sha3_of",
]

# Rows are rendered and sorted in segments of about this many rows (cut where the event time
# changes), rendered in worker threads while the caller hashes the segments before them
# (Arrow compute and hashlib release the GIL); this also keeps strings far below the 2 GiB
# offset limit.
_BATCH_ROWS = 1 << 16
# Segments rendered ahead of the one being hashed (bounds the extra memory).
_LOOKAHEAD = 3
_CSV_ROWS = pacsv.WriteOptions(
    include_header=False, delimiter="\t", quoting_style="none", batch_size=1 << 16
)



def logical_hash(
    table: pa.Table, event_time_column: str = "event_time", system_time_column: str = "system_time"
) -> bytes:
    """SHA3-256 digest (32 bytes) of the table's canonical text."""
    return sha3_of(canonical_rows(table, event_time_column, system_time_column))


def file_logical_hash(
    path: str | os.PathLike, event_time_column: str = "event_time",
    system_time_column: str = "system_time", batch_bytes: int = 16 << 20,
) -> tuple[bytes, int]:
    """``logical_hash`` of a Parquet file and its number of rows, holding about
    ``batch_bytes`` of it at a time when its rows are in event-time order (slices are written
    so), else the whole file.

    In event-time order the canonical text is the concatenation of the texts of consecutive
    parts cut where the event time changes; rows sharing the last event time of a batch wait
    for the next one, so a run of one event time is held whole (a root slice ingested without
    event times is one such run: it is read whole either way).
    """
    f = parquet_reader(path)
    meta = f.metadata
    stored = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if stored <= batch_bytes or event_time_column not in f.schema_arrow.names \
            or not pa.types.is_timestamp(f.schema_arrow.field(event_time_column).type):
        table = f.read()
        return logical_hash(table, event_time_column, system_time_column), table.num_rows
    h = hashlib.sha3_256()
    held: pa.Table | None = None  # the rows of the last event time seen
    last = None  # that event time (as int64)
    batch_rows = max(1024, meta.num_rows * batch_bytes // max(stored, 1))
    for batch in f.iter_batches(batch_size=batch_rows):
        part = pa.Table.from_batches([batch])
        times = part.column(event_time_column).combine_chunks()
        values = numpy_values(times.view(pa.int64()))
        if times.null_count or (len(values) > 1 and not (values[1:] >= values[:-1]).all()) \
                or (last is not None and len(values) and values[0] < last):
            table = f.read()  # not in event-time order
            return logical_hash(table, event_time_column, system_time_column), table.num_rows
        if held is not None:
            part = pa.concat_tables([held, part])
            values = np.concatenate([np.full(held.num_rows, last), values])
        if not len(values):
            continue
        last = values[-1]
        cut = int(np.searchsorted(values, last, side="left"))
        for chunk in canonical_rows(part.slice(0, cut), event_time_column, system_time_column):
            h.update(chunk)
        held = part.slice(cut)
    if held is not None:
        for chunk in canonical_rows(held, event_time_column, system_time_column):
            h.update(chunk)
    return h.digest(), meta.num_rows


def canonical_text(
    table: pa.Table, event_time_column: str = "event_time", system_time_column: str = "system_time"
) -> bytes:
    """The exact bytes `logical_hash` hashes (for tests and debugging; holds it all in memory)."""
    return b"".join(bytes(c) for c in canonical_rows(table, event_time_column, system_time_column))


def sha3_of(chunks: Iterable[memoryview]) -> bytes:
    """SHA3-256 digest of the concatenated chunks (`canonical_rows`: the logical hash)."""
    h = hashlib.sha3_256()
    for chunk in chunks:
        h.update(chunk)
    return h.digest()


def canonical_rows(
    table: pa.Table, event_time_column: str = "event_time", system_time_column: str = "system_time"
) -> Iterator[memoryview]:
    """The canonical text in hash order, as chunks of whole rows.

    The rows are first put in event-time order (a numeric sort, skipped when the table is
    already in order, as written slices are); only rows sharing an event time need their
    rendered bytes compared, and only among themselves. So the table is cut into segments at
    event-time changes and each segment is rendered, tie-sorted and handed out in turn, with
    the next segments rendered in worker threads meanwhile.

    When the table starts with a long run of one event time (every row of an ingested file
    usually shares the file's), nothing can be handed out before that whole run is rendered.
    That is done before this returns, on every core; iterating then sorts and hands out rows
    on one core, which leaves the other cores to the caller (ingest writes the Parquet file
    meanwhile).
    """
    if system_time_column in table.column_names:
        table = table.drop_columns([system_time_column])
    if table.num_rows == 0:
        return iter(())
    if table.num_columns == 0:
        raise UnsupportedValueError("a table with rows but no data columns has no canonical text")
    order, ties = None, None  # ties None: one run, every row compared by its bytes
    if event_time_column in table.column_names:
        order, ties = _event_time_order(table[event_time_column])
    segments = _Segments(table, order, ties)
    segments.wait_for_first()
    return iter(segments)


class _Segments:
    """Renders and tie-sorts the segments of a table, up to `_LOOKAHEAD` ahead of the reader."""

    def __init__(self, table: pa.Table, order: np.ndarray | None, ties: np.ndarray | None):
        self.table, self.order, self.ties = table, order, ties
        self.workers = max(2, os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(max_workers=self.workers)
        bounds = _segment_bounds(table.num_rows, ties)
        self.bounds = iter(zip(bounds[:-1], bounds[1:], strict=True))
        self.pending = deque(self._submit(a, b) for a, b in itertools.islice(self.bounds, _LOOKAHEAD))

    def _submit(self, start: int, stop: int) -> tuple[list[Future], Callable[[], pa.Array]]:
        """Start rendering rows [start, stop); returns the tasks and what gives the sorted rows."""
        ties = None if self.ties is None else self.ties[start : stop - 1]
        if stop - start <= _BATCH_ROWS:
            task = self.pool.submit(_segment_rows, self.table, self.order, start, stop, ties)
            return [task], task.result
        # A long run of equal event times: its batches are rendered and sorted in parallel;
        # sorting the whole run is then mostly a merge of sorted chunks (half the work).
        # Equal batches, as many as keeps every worker busy to the end (a multiple of their number).
        count = self.workers * -(-(stop - start) // (self.workers * _BATCH_ROWS))
        size = -(-(stop - start) // count)
        part = _segment(self.table, self.order, start, stop)
        tasks = []
        for offset in range(0, stop - start, size):
            batch_ties = None if ties is None else ties[offset : offset + size - 1]
            tasks.append(self.pool.submit(_sorted_rows, part.slice(offset, size), batch_ties))
        return tasks, lambda: _sort_ties(
            pa.chunked_array([t.result().cast(pa.large_string()) for t in tasks], pa.large_string()),
            ties,
        )

    def wait_for_first(self) -> None:
        if len(self.pending[0][0]) > 1:  # a long run
            futures.wait(self.pending[0][0])

    def __iter__(self) -> Iterator[memoryview]:
        with self.pool:
            while self.pending:
                rows = self.pending.popleft()[1]()
                self.pending.extend(self._submit(a, b) for a, b in itertools.islice(self.bounds, 1))
                for chunk in rows.chunks if isinstance(rows, pa.ChunkedArray) else [rows]:
                    yield _values_buffer(chunk)


def _event_time_order(column: pa.ChunkedArray) -> tuple[np.ndarray | None, np.ndarray]:
    """Row order by event time (None: already in order) and, in that order, which neighbours tie.

    ``ties[i]`` is true when rows i and i + 1 (in event-time order) have equal event times
    (both null counts as equal; nulls sort last).
    """
    t = column.type
    if pa.types.is_timestamp(t):
        key = column.cast(pa.timestamp(t.unit))  # the instant, whatever the zone
        chunk_values = [numpy_values(c.view(pa.int64())) for c in key.chunks]
    elif pa.types.is_date(t):  # the day
        key = column.cast(pa.date32(), safe=False)  # date64 not whole days: refused later
        chunk_values = [numpy_values(c.view(pa.int32())) for c in key.chunks]
    else:  # any other sortable type: equal values get equal dense ranks
        key = pa.chunked_array([pc.rank(column, tiebreaker="dense", null_placement="at_end")])
        chunk_values = [numpy_values(c) for c in key.chunks]
    values = np.concatenate(chunk_values) if chunk_values else np.empty(0, np.int64)
    order = None
    if key.null_count:
        valid = np.concatenate([validity(c) for c in key.chunks])
        values = np.where(valid, values, 0)
        order = np.lexsort((values, ~valid))  # stable; nulls last
        values, valid = values[order], valid[order]
        return order, (values[1:] == values[:-1]) & (valid[1:] == valid[:-1])
    if len(values) > 1 and not (values[1:] >= values[:-1]).all():
        order = np.argsort(values, kind="stable")  # timsort: fast on nearly ordered input
        values = values[order]
    return order, values[1:] == values[:-1]


def _segment_bounds(n: int, ties: np.ndarray | None) -> list[int]:
    """Segment starts (and n) about `_BATCH_ROWS` apart, never inside a run of equal times."""
    if ties is None or n <= _BATCH_ROWS:
        return [0, n]
    run_starts = np.flatnonzero(~ties) + 1
    wanted = np.arange(_BATCH_ROWS, n, _BATCH_ROWS)
    i = np.searchsorted(run_starts, wanted)
    cuts = np.unique(run_starts[i[i < len(run_starts)]])
    return [0, *cuts.tolist(), n]


def _segment_rows(
    table: pa.Table, order: np.ndarray | None, start: int, stop: int, ties: np.ndarray | None
) -> pa.Array | pa.ChunkedArray:
    """A segment's canonical rows in hash order (a worker's task)."""
    batches = _segment(table, order, start, stop).to_batches()
    if len(batches) == 1:
        rows = _render_batch(batches[0])
    else:
        rows = pa.chunked_array([_render_batch(b) for b in batches], pa.string())
    return _sort_ties(rows, ties)


def _sorted_rows(part: pa.Table, ties: np.ndarray | None) -> pa.Array:
    """Rows of a part of a long run, tied neighbours in byte order (a worker's task)."""
    (batch,) = part.combine_chunks().to_batches()  # copies only columns cut by a chunk boundary
    return _sort_ties(_render_batch(batch), ties)


def _segment(table: pa.Table, order: np.ndarray | None, start: int, stop: int) -> pa.Table:
    if order is None:
        return table.slice(start, stop - start)
    return table.take(order[start:stop])


def _sort_ties(rows: pa.Array | pa.ChunkedArray, ties: np.ndarray | None):
    """Order rows of equal event time (neighbours where `ties` is true) by their bytes."""
    if len(rows) < 2:
        return rows
    if ties is None or ties.all():
        return rows.take(pc.sort_indices(rows))
    if not ties.any():
        return rows
    member = np.zeros(len(rows), dtype=bool)  # rows in a run of two or more
    member[:-1] = ties
    member[1:] |= ties
    tied = np.flatnonzero(member)
    run = np.concatenate([[0], np.cumsum(~ties)])  # run number of every row
    keys = pa.table({"run": run[tied], "row": rows.take(tied)})
    within = pc.sort_indices(keys, [("run", "ascending"), ("row", "ascending")]).to_numpy()
    order = np.arange(len(rows))
    order[tied] = tied[within]
    return rows.take(order)


def _render_batch(batch: pa.RecordBatch) -> pa.Array:
    """One string per row: the columns' canonical text joined by tabs, ended by a newline."""
    pieces = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            pieces.append(render(column))
        except (pa.ArrowInvalid, UnsupportedValueError) as e:  # e.g. nanoseconds not whole µs
            raise UnsupportedValueError(f"column {name!r}: {e}") from e
    if len(pieces) == 1:
        return append_text(pieces[0], "\n")
    if any(_has_quote(p) for p, f in zip(pieces, batch.schema, strict=True) if _is_text(f.type)):
        return _join(pieces)
    return _csv_join(pieces)


def _join(pieces: list[pa.Array]) -> pa.Array:
    """The rows by ``binary_join_element_wise`` (for what the CSV writer cannot join)."""
    return pc.binary_join_element_wise(*pieces[:-1], append_text(pieces[-1], "\n"), "\t")


def _csv_join(pieces: list[pa.Array]) -> pa.Array:
    """The rows through Arrow's CSV writer: tab-delimited, unquoted, LF-ended.

    Twice as fast as ``binary_join_element_wise``. It writes the values as they are, except
    that it refuses a value holding a quote when quoting is off (the caller joins those). The
    row boundaries follow from the pieces' lengths.
    """
    lengths = np.full(len(pieces[0]), len(pieces), dtype=np.int64)  # the tabs and the LF
    for piece in pieces:
        lengths += np.diff(offsets_and_data(piece)[0])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        return _join(pieces)
    buffer = pa.allocate_buffer(int(offsets[-1]))
    batch = pa.RecordBatch.from_arrays(pieces, [str(i) for i in range(len(pieces))])
    pacsv.write_csv(batch, pa.FixedSizeBufferWriter(buffer), _CSV_ROWS)
    return pa.Array.from_buffers(
        pa.string(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)), buffer]
    )


def _is_text(t: pa.DataType) -> bool:
    while isinstance(t, pa.BaseExtensionType) or pa.types.is_dictionary(t):
        t = t.storage_type if isinstance(t, pa.BaseExtensionType) else t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _has_quote(text: pa.Array) -> bool:
    offsets, data = offsets_and_data(text)
    return bool((data[offsets[0] : offsets[-1]] == ord('"')).any())


def _values_buffer(arr: pa.Array) -> memoryview:
    """The bytes of a string array's values, i.e. its strings concatenated (no copy)."""
    offsets, data = offsets_and_data(arr)
    return data[offsets[0] : offsets[-1]].data
