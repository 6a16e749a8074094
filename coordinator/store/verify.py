"""Verify a current-ODF dataset folder: the chain, then every object it names.

Invariants:

- The chain is read as ``read.walk`` reads it (each block hashed against its name before it is
  decoded) and, when it reaches the Seed, checked with the chain rules; a break is one problem,
  and the objects of every block read are still checked.
- Every data file and checkpoint a block names must be present under its physical hash; its
  size and the SHA3-256 of its bytes are compared with the block's **before** anything parses
  it; only then is a data file's footer read and its offsets compared and, when ``deep``, its
  records read and their logical hash (``arrow0-sha3-256``) compared (``odf_slice.
  slice_hashes``). The physical hash proves the bytes are the ones the block was written
  with; the logical hash, about six times the bytes in SHA3 work (schemas/ODF-039-DATA.md),
  proves the block's own hashes agree with each other, which a writer of ours made sure of;
  a deep check also reads the operation types (each correct-from directly before its
  correct-to).
- Files are checked in parallel threads (hashlib releases the GIL): the physical hashes of a
  dataset take about what SHA3 over its bytes takes on all cores. They start before anything
  that reads Parquet is imported (pyarrow, ~0.2 s of a verify, is loaded meanwhile), the
  largest files first.
- An object named by several blocks (a checkpoint carried on) is checked once, for the oldest.
- Each problem is one line naming the block's sequence number and hash, the file and what
  differs (``read.Problem``); problems are listed oldest block first, ``refs/head`` first of all.
- A compacted slice (``compaction``) is checked through the compacted file holding its rows:
  the file by the size and multihash its compaction recorded and the slice's offsets by the
  block's; ``deep``, its rows by the block's logical hash and, rebuilt, by its physical hash
  and size. Its original, where kept, is checked as any data file; where not, its bytes'
  own check is the rebuilt one (``compacted_note`` says so in words).
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.multiformats import ARROW0_SHA3_256, SHA3_256, Multihash
from ..metadata.odf39.events import Checkpoint, DataSlice, SetVocab
from ..workspace.fsutil import physical_hash
from . import layout
from .compaction import CompactedFile, CompactionIndex, Placed, load_index, rebuilt_bytes, rows_of
from .compaction import file_problem as compacted_problem
from .read import ChainBroken, Problem, StoredBlock, StoreError, build, objects_of, walk

if TYPE_CHECKING:
    import pyarrow as pa

    from ..data.odf_slice import Vocabulary


def verify_folder(root: Path, *, deep: bool = True) -> list[Problem]:
    """Every problem of the dataset in ``root``, oldest block first (none: it is sound);
    ``deep``: recompute every slice's logical hash too."""
    newest_first, problem = walk(root)
    problems = [problem] if problem is not None else []
    oldest_first = newest_first[::-1]
    if problem is None and oldest_first:
        try:
            build(oldest_first)  # what only the reference refuses is apart: verified.py
        except ChainBroken as e:
            problems.append(e.problem)
    try:
        index = load_index(root)
    except StoreError as e:
        problems.append(Problem(None, None, str(e)))
        index = CompactionIndex()
    every = _object_checks(oldest_first)
    compacted = _compacted(root, index, every)
    gone = {p.physical for members in compacted.values() for _, _, p in members
            if not (root / layout.data_file(p.physical)).is_file()}
    # largest first, so that no core is left hashing one big file alone at the end
    checks = sorted((c for c in every if c[1].physical_hash not in gone), key=lambda c: -c[1].size)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # hashing frees the GIL
        hashed = [pool.submit(file_problem, root / _file_of(obj), obj.physical_hash, obj.size)
                  for _, obj in checks]
        vocabulary = vocabulary_of(next((b.block.event for b in newest_first
                                         if isinstance(b.block.event, SetVocab)), None))
        # queued after every hash, so a check waiting for its file's never holds one back
        found = [pool.submit(_check, root, vocabulary, deep, stored, obj, bytes_problem)
                 for (stored, obj), bytes_problem in zip(checks, hashed, strict=True)]
        held = [pool.submit(_compacted_problems, root, file, members, vocabulary, deep)
                for file, members in compacted.items()]
        problems += [p for f in found if (p := f.result()) is not None]
        problems += [p for f in held for p in f.result()]
    return sorted(problems, key=_age)


Member = tuple[StoredBlock, DataSlice, Placed]


def _compacted(root: Path, index: CompactionIndex,
               checks: list[tuple[StoredBlock, DataSlice | Checkpoint]]) -> dict[CompactedFile, list[Member]]:
    """The chain's compacted slices, by the compacted file holding their rows."""
    out: dict[CompactedFile, list[Member]] = {}
    for stored, obj in checks:
        found = index.placement(obj.physical_hash) if isinstance(obj, DataSlice) else None
        if found is not None:
            out.setdefault(found[0], []).append((stored, obj, found[1]))  # type: ignore[arg-type]
    return out


def compacted_note(root: Path, deep: bool) -> str | None:
    """How a compaction changed the checks of this folder, in words (None: never compacted)."""
    index = load_index(root)
    placed = [p for f in index.files for p in f.slices]
    if not placed:
        return None
    gone = sum(not (root / layout.data_file(p.physical)).is_file() for p in placed)
    held = (f"{len(placed)} slices are read from {len(index.files)} compacted "
            f"file{'s' * (len(index.files) != 1)}")
    kept = f"{len(placed) - gone} of their originals are kept and were checked too"
    if deep:
        return (f"{held}: each one's rows checked by its block's logical hash and, rebuilt, by "
                f"its physical hash; {kept}")
    if not gone:
        return f"{held}: checked by the size and hash their compaction recorded; {kept}"
    return (f"{held}: checked by the size and hash their compaction recorded; {gone} originals are "
            "not kept, so their blocks' physical and logical hashes are checked only by "
            "coord verify --deep, which rebuilds each from its rows")


def _compacted_problems(root: Path, file: CompactedFile, members: list[Member],
                        vocabulary: Vocabulary, deep: bool) -> list[Problem]:
    """The problems of the slices one compacted file holds: the file's bytes against the
    index, each slice's place against its block, and, ``deep``, its rows against its block."""
    name = layout.compacted_file(file.name)
    first = members[0][0]
    problems = [Problem(stored.block.sequence_number, stored.hash,
                        f"{name}: the compaction places offsets {p.start} to {p.end} here, the block "
                        f"records {obj.offset_interval.start} to {obj.offset_interval.end}")
                for stored, obj, p in members
                if (p.start, p.end) != (obj.offset_interval.start, obj.offset_interval.end)]
    reason = compacted_problem(root, file)
    if reason is not None:
        last = members[-1][0].block.sequence_number
        problems.append(Problem(first.block.sequence_number, first.hash,
                                f"{name} (the compacted rows of blocks {first.block.sequence_number} to "
                                f"{last}): {reason}"))
    if not deep or (reason is not None and not (root / name).is_file()):
        return problems
    import pyarrow as pa

    try:
        rows = rows_of(root / name, [p for _, _, p in members])
    except (pa.ArrowException, OSError) as e:
        return [*problems, Problem(first.block.sequence_number, first.hash,
                                   f"{name}: not a readable compacted file ({e})")]
    for (stored, obj, placed), part in zip(members, rows, strict=True):
        why = _rows_problem(root, obj, placed, part, vocabulary)
        if why is not None:
            problems.append(Problem(stored.block.sequence_number, stored.hash,
                                    f"{layout.data_file(obj.physical_hash)} (rows {placed.row} to "
                                    f"{placed.row + placed.rows - 1} of {name}): {why}"))
    return problems


def _rows_problem(root: Path, expected: DataSlice, placed: Placed, rows: pa.Table,
                  vocabulary: Vocabulary) -> str | None:
    """Why a compacted slice's rows are not the ones its block records: its offsets, its
    bytes rebuilt (where they rebuild), its logical hash as arrow-rs reads the slice."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..data.arrow_digest import record_digest
    from ..data.parquet_arrow_rs import arrow_rs_schema

    if rows.num_rows != placed.rows or vocabulary.offset not in rows.column_names:
        return f"{rows.num_rows} rows, the block's offsets cover {placed.rows}"
    bounds = pc.min_max(rows[vocabulary.offset])
    have, want = (bounds["min"].as_py(), bounds["max"].as_py()), expected.offset_interval
    if have != (want.start, want.end):
        return f"offsets {have[0]} to {have[1]}, the block records {want.start} to {want.end}"
    original = root / layout.data_file(expected.physical_hash)
    if placed.rebuilds:
        data = rebuilt_bytes(rows)
        actual = Multihash(SHA3_256, physical_hash(data))
        if actual != expected.physical_hash or len(data) != expected.size:
            return f"its rows rebuild to bytes hashing to {actual}, not to {expected.physical_hash}"
        read_as = arrow_rs_schema(pq.ParquetFile(pa.BufferReader(data)))
    elif original.is_file():
        read_as = arrow_rs_schema(pq.ParquetFile(original))
    else:
        return "missing, and its rows do not give its bytes back"
    logical = Multihash(ARROW0_SHA3_256, record_digest(rows.cast(read_as)))
    if logical != expected.logical_hash:
        return f"its records hash to {logical}, the block records {expected.logical_hash}"
    return None


def _age(problem: Problem) -> int:
    return -1 if problem.sequence_number is None else problem.sequence_number


def vocabulary_of(event: SetVocab | None) -> Vocabulary:
    """The names of a dataset's system columns, as its ``SetVocab`` (if any) gives them."""
    from ..data.odf_slice import DEFAULT_VOCABULARY, Vocabulary

    if event is None:
        return DEFAULT_VOCABULARY
    given = {"offset": event.offset_column, "operation_type": event.operation_type_column,
             "system_time": event.system_time_column, "event_time": event.event_time_column}
    return Vocabulary(**{k: v for k, v in given.items() if v is not None})


def _object_checks(oldest_first: list[StoredBlock]) -> list[tuple[StoredBlock, DataSlice | Checkpoint]]:
    """(block, object) for each object the chain names, with the oldest block naming it."""
    seen: set[Multihash] = set()
    out: list[tuple[StoredBlock, DataSlice | Checkpoint]] = []
    for stored in oldest_first:
        for obj in objects_of(stored.block):
            if obj is not None and obj.physical_hash not in seen:
                seen.add(obj.physical_hash)
                out.append((stored, obj))
    return out


def _file_of(obj: DataSlice | Checkpoint) -> str:
    if isinstance(obj, DataSlice):
        return layout.data_file(obj.physical_hash)
    return layout.checkpoint_file(obj.physical_hash)


def _check(root: Path, vocabulary: Vocabulary, deep: bool, stored: StoredBlock,
           obj: DataSlice | Checkpoint, bytes_problem: Future[str | None]) -> Problem | None:
    """The object's problem: its bytes' (``file_problem``, being computed), then a slice's
    records' (read only once its bytes are the block's)."""
    name = _file_of(obj)
    reason = bytes_problem.result()
    if reason is None and isinstance(obj, DataSlice):
        reason = _slice_problem(root / name, obj, vocabulary, deep)
    if reason is None:
        return None
    return Problem(stored.block.sequence_number, stored.hash, f"{name}: {reason}")


def file_problem(path: Path, expected: Multihash, size: int) -> str | None:
    """Why the file's bytes are not the ones the block names (checked before any parsing)."""
    if not path.is_file():
        return "missing"
    actual_size = path.stat().st_size
    if actual_size != size:
        return f"{actual_size} bytes, the block records {size}"
    actual = Multihash(SHA3_256, physical_hash(path))
    if actual != expected:
        return f"its bytes hash to {actual}, not to its name (the file was changed)"
    return None


def _slice_problem(path: Path, expected: DataSlice, vocabulary: Vocabulary, deep: bool) -> str | None:
    """Why the records of a file whose bytes are the block's are not what the block says."""
    import pyarrow as pa

    from ..data.odf_slice import SliceFileError, slice_hashes, slice_offsets

    try:
        if deep:
            found = slice_hashes(path, vocabulary, physical=expected.physical_hash)
            logical, offsets = found.logical, found.offsets
        else:
            logical, offsets = expected.logical_hash, slice_offsets(path, vocabulary)
    except (SliceFileError, pa.ArrowException, OSError) as e:
        return f"not a readable slice ({e})"
    if logical != expected.logical_hash:
        return f"its records hash to {logical}, the block records {expected.logical_hash}"
    if offsets != expected.offset_interval:
        have = f"{offsets.start} to {offsets.end}" if offsets else "none"
        want = expected.offset_interval
        return f"offsets {have}, the block records {want.start} to {want.end}"
    return None
