"""A current-ODF (0.39) dataset's data files checked before anything reads them, as
``trust.slice_check`` checks a 0.18 dataset's (``coord tail``, ``coord sql``, the API).

- The check is ``verify``'s first one: the file present, of the size its block records, its
  bytes hashing (SHA3-256 multihash) to the physical hash it is named by, before any parsing
  (``verify.file_problem``); then its footer's row count against the offsets the block records.
- It runs once per file state, through the same cache as 0.18 (``workspace.slice_cache``,
  keyed by the block's multihash); a refused file raises ``trust.slice_check.ChangedSlice``.
- A compacted slice (``compaction``) is read from its bytes rebuilt from its rows, checked as
  its original would be; a reader that takes the rows of many slices at once
  (``checked_current_scan``) reads a compacted file whole instead, checked by the size and
  multihash the compaction recorded (keyed ``compacted/<multihash>``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..trust.slice_check import CheckedFile, checked_files
from . import layout
from .compaction import file_problem as compacted_problem
from .compaction import scan, slice_files
from .dataset import CurrentDataset
from .read import SliceRecord
from .verify import file_problem


def checked_current_files(ds: CurrentDataset, slices: Iterable[SliceRecord]) -> list[Path]:
    """The data files of a current-ODF (0.39) dataset's slices, in the order given, each
    checked as ``store.verify`` checks it before parsing: present, of the size the block
    records, its bytes hashing (SHA3-256 multihash) to the physical hash; and its footer's row
    count that of the offsets it covers. Raises ``ChangedSlice`` as for 0.18."""
    wanted = list(slices)
    paths = slice_files(ds.root, [r.slice.physical_hash for r in wanted])

    def checks(todo: list[int]) -> Callable[[int], str | None]:
        def check(i: int) -> str | None:
            record = wanted[i].slice
            reason = file_problem(paths[i], record.physical_hash, record.size)
            if reason is None:
                interval = record.offset_interval
                reason = _rows_problem(paths[i], interval.end - interval.start + 1)
            return reason

        return check

    files = [CheckedFile(str(r.block_hash), path, str(r.slice.physical_hash))
             for r, path in zip(wanted, paths, strict=True)]
    return checked_files(ds, files, checks)


def checked_current_scan(ds: CurrentDataset, slices: Iterable[SliceRecord]) -> list[Path]:
    """Files whose rows, read in order, are exactly those of ``slices`` (oldest first), as few
    as may be: a run of slices a compacted file holds whole is that file, checked by the size
    and multihash its compaction recorded; every other slice as ``checked_current_files``."""
    wanted = list(slices)
    pieces = scan(ds.root, [r.slice.physical_hash for r in wanted])
    single = checked_current_files(ds, [wanted[p.first] for p in pieces if p.file is None])
    compacted = [p.file for p in pieces if p.file is not None]

    def checks(todo: list[int]) -> Callable[[int], str | None]:
        return lambda i: compacted_problem(ds.root, compacted[i])

    whole = iter(checked_files(ds, [CheckedFile(layout.compacted_file(f.name),
                                                ds.root / layout.compacted_file(f.name), str(f.name))
                                    for f in compacted], checks))
    one = iter(single)
    return [next(one) if p.file is None else next(whole) for p in pieces]


def _rows_problem(path: Path, expected: int) -> str | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as e:
        return f"not a readable Parquet file ({e})"
    return None if rows == expected else f"has {rows} records, the block's offsets cover {expected}"
