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
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.multiformats import SHA3_256, Multihash
from ..metadata.odf39.events import Checkpoint, DataSlice, SetVocab
from ..workspace.fsutil import physical_hash
from . import layout
from .read import ChainBroken, Problem, StoredBlock, build, objects_of, walk

if TYPE_CHECKING:
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
    # largest first, so that no core is left hashing one big file alone at the end
    checks = sorted(_object_checks(oldest_first), key=lambda c: -c[1].size)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # hashing frees the GIL
        hashed = [pool.submit(file_problem, root / _file_of(obj), obj.physical_hash, obj.size)
                  for _, obj in checks]
        vocabulary = vocabulary_of(next((b.block.event for b in newest_first
                                         if isinstance(b.block.event, SetVocab)), None))
        # queued after every hash, so a check waiting for its file's never holds one back
        found = [pool.submit(_check, root, vocabulary, deep, stored, obj, bytes_problem)
                 for (stored, obj), bytes_problem in zip(checks, hashed, strict=True)]
        problems += [p for f in found if (p := f.result()) is not None]
    return sorted(problems, key=_age)


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
