"""A current-ODF (0.39) dataset's data files checked before anything reads them, as
``trust.slice_check`` checks a 0.18 dataset's (``coord tail``, ``coord sql``, the API).

- The check is ``verify``'s first one: the file present, of the size its block records, its
  bytes hashing (SHA3-256 multihash) to the physical hash it is named by, before any parsing
  (``verify.file_problem``); then its footer's row count against the offsets the block records.
- It runs once per file state, through the same cache as 0.18 (``workspace.slice_cache``,
  keyed by the block's multihash); a refused file raises ``trust.slice_check.ChangedSlice``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..trust.slice_check import CheckedFile, checked_files
from .dataset import CurrentDataset
from .read import SliceRecord
from .verify import file_problem


def checked_current_files(ds: CurrentDataset, slices: Iterable[SliceRecord]) -> list[Path]:
    """The data files of a current-ODF (0.39) dataset's slices, in the order given, each
    checked as ``store.verify`` checks it before parsing: present, of the size the block
    records, its bytes hashing (SHA3-256 multihash) to the physical hash; and its footer's row
    count that of the offsets it covers. Raises ``ChangedSlice`` as for 0.18."""
    wanted = list(slices)

    def checks(todo: list[int]) -> Callable[[int], str | None]:
        def check(i: int) -> str | None:
            record = wanted[i].slice
            path = ds.data_file(record)
            reason = file_problem(path, record.physical_hash, record.size)
            if reason is None:
                reason = _rows_problem(path, record.offset_interval.end - record.offset_interval.start + 1)
            return reason

        return check

    files = [CheckedFile(str(r.block_hash), ds.data_file(r.slice), str(r.slice.physical_hash))
             for r in wanted]
    return checked_files(ds, files, checks)


def _rows_problem(path: Path, expected: int) -> str | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as e:
        return f"not a readable Parquet file ({e})"
    return None if rows == expected else f"has {rows} records, the block's offsets cover {expected}"
