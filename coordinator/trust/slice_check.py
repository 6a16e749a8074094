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

What it cannot see: a file changed between the check and the read (the readers open it by
path after), or changed within one timestamp tick of the check keeping size and inode.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import Conflict
from ..metadata.objects import DatasetVocabulary, DataSlice, MetadataBlock
from ..workspace import Dataset
from ..workspace.slice_cache import SliceCache, file_state


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
    cache = SliceCache(ds)
    todo = [(h, s) for h, s in wanted if not cache.holds(ds.data_file(h), h, s)]
    if todo:
        # imported only now: it brings Arrow's Parquet and compute modules, which a read whose
        # files are all cached does not need (a tenth of a second of the command's start)
        from .verify import check_data_file

        vocab = ds.state().vocab if any(s.physical_hash is None for _, s in todo) else DatasetVocabulary()

        def check(item: tuple[bytes, DataSlice]) -> str | None:
            h, expected = item
            path = ds.data_file(h)
            before = file_state(path)
            reason = check_data_file(path, expected, vocab)
            if reason is None and before is not None and before == file_state(path):
                cache.add(h, before, expected)
            return reason

        # hashlib and Arrow release the GIL, so threads use every core (as verify does)
        with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 2)) as pool:
            reasons = list(pool.map(check, todo))
        cache.save()
        for (h, _), reason in zip(todo, reasons, strict=True):
            if reason is not None:
                raise ChangedSlice(f"dataset {ds.id}: refusing to read {ds.data_file(h)}: {reason}; "
                                   f"run coord verify {ds.id} to check the whole dataset")
    return [ds.data_file(h) for h, _ in wanted]
