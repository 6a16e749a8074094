"""Local slices are checked against their block before anything reads them.

Every reader of a dataset's records (``coord sql``, ``coord tail``, the HTTP API, a
derivative's inputs, provenance, publish and push, a root's ledger and snapshot merges)
takes its data files from ``checked_slices``, so a changed file is refused instead of read:
a flipped byte would otherwise be computed with silently (only ``coord verify`` noticed).

- The check is ``verify``'s (``check_data_file``): the file's SHA3-256 against the block's
  ``physical_hash`` and its record count against the footer's; a slice recorded without a
  physical hash (written by another tool) is checked by its logical hash.
- It runs once per file state: a file found good, or installed by a commit (which wrote or
  checked exactly those bytes), is remembered with its state (``workspace/slice_cache.py``);
  while that stays the same the file is not read again.
- A refused file raises ``ChangedSlice``, a ``Conflict``: the request is right, the state of
  the workspace refuses it until the file is restored (it is not the request that is
  ``Invalid``); ``coord serve`` answers 409.

A current-ODF (0.39) dataset's files go through the same ``checked_files`` with the check of
their version (``store.checked``).

What it cannot see: a file changed between the check and the read (the readers open it by
path after), or changed within one timestamp tick of the check keeping size and inode.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..errors import Conflict
from ..metadata.objects import DatasetVocabulary, DataSlice, MetadataBlock
from ..workspace import Dataset
from ..workspace.slice_cache import DatasetPlace, SliceCache, expected_hash, file_state


class ChangedSlice(Conflict):
    """A local data file is not the slice its block records."""


def checked_slices(ds: Dataset, blocks: Iterable[tuple[bytes, MetadataBlock]]) -> list[Path]:
    """The data files of those ``blocks`` that add a slice, in the same order, each checked
    against its block (see the module doc); raises ``ChangedSlice`` for the first one that
    is not what its block records."""
    return checked_slice_files(ds, [(h, b.output_slice) for h, b in blocks if b.output_slice is not None])


def checked_slice_files(ds: Dataset, slices: Iterable[tuple[bytes, DataSlice]]) -> list[Path]:
    """``checked_slices`` for callers holding (block hash, the slice it records) pairs."""
    wanted = list(slices)

    def checks(todo: list[int]) -> Callable[[int], str | None]:
        # imported only now: it brings Arrow's Parquet and compute modules, which a read whose
        # files are all cached does not need (a tenth of a second of the command's start)
        from .verify import check_data_file

        lacking = any(wanted[i][1].physical_hash is None for i in todo)
        vocab = ds.state().vocab if lacking else DatasetVocabulary()
        return lambda i: check_data_file(ds.data_file(wanted[i][0]), wanted[i][1], vocab)

    files = [CheckedFile(h.hex(), ds.data_file(h), expected_hash(s)) for h, s in wanted]
    return checked_files(ds, files, checks)


@dataclass(frozen=True)
class CheckedFile:
    key: str  # its entry in the cache: the block that names it
    path: Path
    expected: str  # the hash it is checked against, as the cache records it


def checked_files(ds: DatasetPlace, files: list[CheckedFile],
                  checks: Callable[[list[int]], Callable[[int], str | None]]) -> list[Path]:
    """The files, each not in the cache checked by ``checks(todo)`` (built only when some are
    to be checked) and remembered when good; ``ChangedSlice`` for the first one refused."""
    cache = SliceCache(ds)
    todo = [i for i, f in enumerate(files) if not cache.holds_file(f.path, f.key, f.expected)]
    if todo:
        check = checks(todo)

        def run(i: int) -> str | None:
            f = files[i]
            before = file_state(f.path)
            reason = check(i)
            if reason is None and before is not None and before == file_state(f.path):
                cache.add_file(f.key, before, f.expected)
            return reason

        # hashlib and Arrow release the GIL, so threads use every core (as verify does)
        with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 2)) as pool:
            reasons = list(pool.map(run, todo))
        cache.save()
        for i, reason in zip(todo, reasons, strict=True):
            if reason is not None:
                raise ChangedSlice(f"dataset {ds.id}: refusing to read {files[i].path}: {reason}; "
                                   f"run coord verify {ds.id} to check the whole dataset")
    return [f.path for f in files]
