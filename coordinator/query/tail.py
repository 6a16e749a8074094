"""The last records of a dataset, now or as at a system time or block (``coord tail``, the
API's ``/tail``): one implementation for both front ends.

Only the newest slices that hold the last ``n`` records (by the counts their blocks record)
are checked (``trust.slice_check``) and read. The last rows of a dataset's state
(``state_tail``, ``state.py``) need every slice: each is checked and DuckDB reads them.
"""
from __future__ import annotations

import itertools
import re
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.objects import DatasetSource, MetadataBlock
from ..metadata.timestamps import format_timestamp
from ..trust.slice_check import checked_slices
from ..workspace import Dataset
from ..workspace.catalog import block_as_at
from ..workspace.config import OdfVersion
from ..workspace.dataset import BlockNotFound

if TYPE_CHECKING:
    import pyarrow as pa

    from ..metadata.odf39.adapt import PushSource
    from ..store.dataset import CurrentDataset
    from .sql import DatasetRead
    from .state import StateKey


def tail(ds: Dataset, n: int, as_at: str | None = None) -> pa.Table:
    """The last ``n`` records ``ds`` holds, or held at ``as_at`` (RFC 3339 time or block)."""
    if ds.ws.odf_of(ds.id) is OdfVersion.V039:
        return current_tail(ds, n, as_at)
    newest: list[tuple[bytes, MetadataBlock]] = []
    stop = None if as_at is None else block_as_at(ds, as_at)
    if as_at is None or stop is not None:  # else the dataset did not exist yet
        have = 0
        for h, b in itertools.dropwhile(lambda hb: stop is not None and hb[0] != stop, ds.blocks()):
            if have >= n:
                break
            if b.output_slice is not None:
                newest.append((h, b))
                have += b.output_slice.num_records
    return last_records(checked_slices(ds, newest[::-1]), n)


def current_tail(ds: Dataset, n: int, as_at: str | None = None) -> pa.Table:
    """``tail`` of a current-ODF dataset: its newest records by offset (the stored table);
    ``as_at`` an RFC 3339 system time or a block (multihash or digest hex, a prefix)."""
    from ..store.checked import checked_current_files
    from .sql import current_slices

    current, stop, until = _current_as_at(ds, as_at)
    newest, have = [], 0
    for record in reversed(current_slices(current, stop, until)):
        if have >= n:
            break
        newest.append(record)
        have += record.slice.offset_interval.end - record.slice.offset_interval.start + 1
    return last_records(checked_current_files(current, newest[::-1]), n)


def _current_as_at(ds: Dataset, as_at: str | None) -> tuple[CurrentDataset, bytes | None, datetime | None]:
    """The current-ODF dataset ``ds`` and where ``as_at`` stops a read of it: at a block (its
    binary multihash) or at a system time."""
    from ..metadata.timestamps import parse_timestamp
    from ..store.dataset import CurrentDataset
    from .sql import resolve_as_at

    stop = until = None
    if as_at is not None and re.fullmatch(r"[0-9a-fA-F]+", as_at):
        found = resolve_as_at(ds.ws, as_at)
        if found.dataset != ds.id:
            raise BlockNotFound(f"--as-at {as_at}: no block of {ds.id} starts with {as_at}")
        stop = found.block
    elif as_at is not None:
        until = parse_timestamp(as_at)
    return CurrentDataset(ds.ws, ds.id), stop, until


def state_tail(ds: Dataset, n: int, as_at: str | None = None, as_of: datetime | None = None) -> pa.Table:
    """The last ``n`` rows of the state of ``ds`` (in the stored order of their versions), as
    the dataset held it at ``as_at`` (RFC 3339 system time or block), as of event time
    ``as_of``; refused for a dataset without a primary key."""
    import duckdb
    import pyarrow as pa

    from .sql import arrow_dataset, dataset_read
    from .state import NoState, no_state, state_key, state_sql

    source: DatasetSource | PushSource | None
    if ds.ws.odf_of(ds.id) is OdfVersion.V039:
        read, source, key = _current_state_read(ds, as_at)
    else:
        stop = None if as_at is None else block_as_at(ds, as_at)
        read = None if as_at is not None and stop is None else dataset_read(ds, stop=stop)
        if read is None:  # no data then: a state without rows, if the dataset has a state
            state = ds.state()
            source, key = state.source, state_key(state.source, state.vocab)
        else:
            source, key = read.source, read.key
    if key is None:
        raise NoState(no_state(ds.id, source))
    if read is None:  # no data yet
        return pa.table({})
    with duckdb.connect(config={"temp_directory": ""}) as con:  # no spill folder in the current one
        con.execute("SET TimeZone = 'UTC'")
        con.register("changes", arrow_dataset(ds.id, read.files, str(ds.ws.root)))
        return con.sql(state_sql("changes", key, as_of, last=n, written=read.written)).to_arrow_table()


def _current_state_read(ds: Dataset, as_at: str | None) -> tuple[
        DatasetRead | None, DatasetSource | PushSource | None, StateKey | None]:
    """``state_tail``'s read of a current-ODF dataset."""
    from .sql import current_definition, current_read

    current, stop, until = _current_as_at(ds, as_at)
    source, key = current_definition(current)
    return current_read(current, stop, until), source, key


def last_records(files: list[Path], num: int) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts: list[pa.Table] = []
    have = 0
    for f in reversed(files):
        if have >= num:
            break
        t = pq.read_table(f)
        parts.insert(0, t)
        have += t.num_rows
    if not parts:
        return pa.table({})
    table = pa.concat_tables(parts, promote_options="permissive")
    return table.slice(max(0, table.num_rows - num))


def json_value(value):
    """Record values JSON has no type for: times in RFC 3339, decimals as text, bytes as hex."""
    if isinstance(value, datetime):
        return format_timestamp(value) if value.tzinfo else value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Decimal) and value.as_tuple().exponent == 0:
        return int(value)  # whole numbers (DuckDB sums BIGINTs as HUGEINT, a DECIMAL(38,0) in Arrow)
    return str(value)  # other decimals as text: exact
