"""``coord compact``: a current-ODF (0.39) dataset's small slices merged into larger files,
not one block changed (``compaction.py`` says where the rows then are and who reads them).

Invariants:

- Only slices newer than the last compaction are taken (those after the newest slice the
  index holds, in chain order); they are cut into runs of consecutive slices with one stored
  schema whose files' bytes (as their blocks record them) stay within the target; a run of one
  slice is left as it is.
- Everything happens under the dataset's lock (its one writer), so no block is appended
  meanwhile, and in this order, each step durable before the next: every original checked by
  its block; each compacted file written under a temporary name, fsynced and renamed to its
  multihash; read back, each slice's rows rebuilt and checked (by its physical hash, else by
  its logical hash: its original is then kept); the index replaced atomically; last, the
  originals that rebuild removed (unless kept).
- A kill at any step leaves a dataset that verifies: before the index, the new file is a
  leftover no reader uses; after it, an original not yet removed is only kept longer. The
  next run removes the leftovers and the originals the index says go, and finishes the work
  exactly once (``CRASH_POINTS``, tests/compact).
- Each run also empties ``compacted/rows/`` (slices rebuilt for readers of one slice at a
  time: a cache), so the space a compaction saved does not come back as small files.
- Not guarded against: a reader of the same dataset running meanwhile (readers take no lock)
  that opens an original or a rebuilt slice just removed fails once; run it again.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.multiformats import SHA3_256, MultiformatError, Multihash
from ..workspace.crash import crash_point
from ..workspace.fsutil import TMP_PREFIX, fsync_dir, install, physical_hash, remove, tmp_name
from . import layout
from .checked import checked_current_files
from .compaction import (
    COMPACTED_ROW_GROUP,
    CompactedFile,
    CompactionIndex,
    Placed,
    load_index,
    rebuilt_bytes,
    rows_of,
    save_index,
)
from .dataset import CurrentDataset
from .read import SliceRecord, StoreError

if TYPE_CHECKING:
    import pyarrow as pa

CRASH_POINTS = ("compact-file-written", "compact-index-written", "compact-original-removed")


class CompactionError(StoreError):
    """A compacted file whose rows do not read back as the slices' blocks record them."""


@dataclass(frozen=True)
class CompactionResult:
    dataset: str
    slices: int  # slices merged by this run
    files: int  # compacted files it wrote
    bytes_before: int  # the merged slices' files, as their blocks record them
    bytes_after: int  # the compacted files it wrote
    removed: int  # originals removed (by this run, and those a killed run left)
    kept: int  # originals of merged slices kept: asked to, or their rows do not rebuild them
    left: int  # slices newer than the last compaction left as they are (a run of one)


def compact(ds: CurrentDataset, target_bytes: int, keep: bool = False) -> CompactionResult:
    """Merge the slices of ``ds`` newer than its last compaction (see the module doc)."""
    with ds.writer() as w:
        state = w.state
        index = load_index(ds.root)
        _remove_leftovers(ds.root, index)
        removed = _remove_originals(ds.root, index)
        slices = list(state.slices) if state is not None else []
        last = max((i for i, r in enumerate(slices) if index.placement(r.slice.physical_hash)), default=-1)
        runs = _runs(ds, slices[last + 1:], target_bytes)
        written = [_write(ds, run, keep) for run in runs if len(run) > 1]
        if written:
            index = index.with_files(written)
            save_index(ds.root, index)
            crash_point("compact-index-written")
            removed += _remove_originals(ds.root, index)
        merged = [p for f in written for p in f.slices]
        return CompactionResult(
            dataset=ds.id, slices=len(merged), files=len(written),
            bytes_before=sum(p.size for p in merged), bytes_after=sum(f.size for f in written),
            removed=removed, kept=sum(p.kept for p in merged),
            left=sum(len(run) for run in runs if len(run) == 1))


def _runs(ds: CurrentDataset, slices: list[SliceRecord], target_bytes: int) -> list[list[SliceRecord]]:
    """Consecutive slices with one stored schema, their files' bytes within the target."""
    import pyarrow.parquet as pq

    runs: list[list[SliceRecord]] = []
    schema, size = None, 0
    for r, path in zip(slices, checked_current_files(ds, slices), strict=True):
        this = pq.read_schema(path)
        if runs and schema is not None and this.equals(schema, check_metadata=True) \
                and size + r.slice.size <= target_bytes:
            runs[-1].append(r)
            size += r.slice.size
        else:
            runs.append([r])
            schema, size = this, r.slice.size
    return runs


def _write(ds: CurrentDataset, run: list[SliceRecord], keep: bool) -> CompactedFile:
    """One compacted file of ``run``'s rows, durable in place and checked slice by slice."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..data.odf_slice import PARQUET_OPTIONS

    folder = ds.root / layout.COMPACTED
    folder.mkdir(parents=True, exist_ok=True)
    tables = [pq.read_table(f) for f in checked_current_files(ds, run)]
    tmp = tmp_name(folder)
    try:
        pq.write_table(pa.concat_tables(tables), tmp,
                       **{**PARQUET_OPTIONS, "row_group_size": COMPACTED_ROW_GROUP})
        name = Multihash(SHA3_256, physical_hash(tmp))
        size = tmp.stat().st_size
        install(tmp, ds.root / layout.compacted_file(name))
    finally:
        tmp.unlink(missing_ok=True)
    crash_point("compact-file-written")
    at, starts = 0, []
    for t in tables:
        starts.append(at)
        at += t.num_rows
    unchecked = [Placed(r.slice.physical_hash, row, r.slice.offset_interval.start,
                        r.slice.offset_interval.end, r.slice.size, rebuilds=False, kept=True)
                 for r, row in zip(run, starts, strict=True)]
    back = rows_of(ds.root / layout.compacted_file(name), unchecked)
    placed = tuple(_checked(ds, r, p, rows, keep) for r, p, rows in zip(run, unchecked, back, strict=True))
    return CompactedFile(name, size, placed)


def _checked(ds: CurrentDataset, r: SliceRecord, p: Placed, rows: pa.Table, keep: bool) -> Placed:
    """``p`` as its rows read back from the compacted file allow: rebuilt byte for byte (its
    original may go), else hashing to its block's logical hash (its original stays)."""
    import pyarrow.parquet as pq

    from ..data.arrow_digest import record_digest
    from ..data.parquet_arrow_rs import arrow_rs_schema
    from ..metadata.multiformats import ARROW0_SHA3_256

    data = rebuilt_bytes(rows)
    if Multihash(SHA3_256, physical_hash(data)) == r.slice.physical_hash and len(data) == r.slice.size:
        return Placed(p.physical, p.row, p.start, p.end, p.size, rebuilds=True, kept=keep)
    read_as = arrow_rs_schema(pq.ParquetFile(ds.root / layout.data_file(r.slice.physical_hash)))
    if Multihash(ARROW0_SHA3_256, record_digest(rows.cast(read_as))) != r.slice.logical_hash:
        raise CompactionError(f"dataset {ds.id}: block {r.sequence_number} ({r.block_hash}): its rows do not "
                              "read back from the compacted file as its block records them; nothing "
                              "was compacted (run coord verify --deep on it)")
    return p


def _remove_originals(root: Path, index: CompactionIndex) -> int:
    """Remove the originals the index says go (rebuilt byte for byte, not kept)."""
    removed = 0
    for f in index.files:
        for p in f.slices:
            original = root / layout.data_file(p.physical)
            if p.rebuilds and not p.kept and original.is_file():
                original.unlink()
                removed += 1
                crash_point("compact-original-removed")
    if removed:
        fsync_dir(root / layout.DATA)
    return removed


def _remove_leftovers(root: Path, index: CompactionIndex) -> None:
    """Remove what a killed compaction left (temporaries, compacted files no index names) and
    the slices rebuilt for per-slice readers, a cache that would otherwise grow back to one
    small file per slice (they are rebuilt when next asked for)."""
    remove(root / layout.REBUILT)
    named = {f.name for f in index.files}
    folder = root / layout.COMPACTED
    for entry in list(folder.iterdir()) if folder.is_dir() else []:
        if entry.name.startswith(TMP_PREFIX) or _object_name(entry.name) not in (None, *named):
            remove(entry)


def _object_name(name: str) -> Multihash | None:
    try:
        return Multihash.parse(name)
    except MultiformatError:
        return None
