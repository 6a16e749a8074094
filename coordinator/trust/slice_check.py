"""Local slices are checked against their block before anything reads them.

Every reader of a dataset's records (``coord sql``, ``coord tail``, the HTTP API, a
derivative's inputs, provenance, publish and push, a root's ledger and snapshot merges)
takes its data files from ``checked_slices``, so a changed file is refused instead of read:
a flipped byte would otherwise be computed with silently (only ``coord verify`` noticed).

- The check is ``verify``'s (``check_data_file``): the file's SHA3-256 against the block's
  ``physical_hash`` and its record count against the footer's; a slice recorded without a
  physical hash (written by another tool) is checked by its logical hash.
- It runs once per file state. A file found good is remembered in
  ``.coord/cache/<id>/checked-slices.json`` under its block, with its identity and state
  (path, device, inode, size, mtime_ns, ctime_ns) and the hash it matched; while these stay
  the same the file is not read again. Rewriting a file in place changes its mtime and
  ctime, and replacing it changes its inode and ctime (``touch -d`` cannot set ctime back),
  so either is checked again.
- The cache is only a shortcut: written atomically, a lost, unreadable or garbled one means
  the files are checked again and the file is rewritten; a failed write costs nothing more.
- A refused file raises ``ChangedSlice``, a ``Conflict``: the request is right, the state of
  the workspace refuses it until the file is restored (it is not the request that is
  ``Invalid``); ``coord serve`` answers 409.

What it cannot see: a file changed between the check and the read (the readers open it by
path after), or changed within one timestamp tick of the check keeping size and inode.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import Conflict
from ..metadata.objects import DatasetVocabulary, DataSlice, MetadataBlock
from ..workspace import Dataset, layout
from ..workspace.fsutil import atomic_write


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
    cache = _Cache(ds.ws.meta / layout.cache_dir(ds.id, layout.CHECKED_SLICES))
    todo = [(h, s) for h, s in wanted if not cache.holds(ds.data_file(h), h, s)]
    if todo:
        # imported only now: it brings Arrow's Parquet and compute modules, which a read whose
        # files are all cached does not need (a tenth of a second of the command's start)
        from .verify import check_data_file

        vocab = ds.state().vocab if any(s.physical_hash is None for _, s in todo) else DatasetVocabulary()

        def check(item: tuple[bytes, DataSlice]) -> str | None:
            h, expected = item
            path = ds.data_file(h)
            before = _state(path)
            reason = check_data_file(path, expected, vocab)
            if reason is None and before is not None and before == _state(path):
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


def _state(path: Path) -> list | None:
    """The file's identity and state, as remembered: None when it cannot be seen."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _expected(s: DataSlice) -> str:
    """The hash a file is checked against: the physical one, else the logical one."""
    return s.physical_hash.hex() if s.physical_hash is not None else f"logical:{s.hash.hex()}"


class _Cache:
    """The files found good: ``{block hex: [path, dev, ino, size, mtime_ns, ctime_ns, expected]}``."""

    def __init__(self, path: Path):
        self.path = path
        self.changed = False
        try:
            entries = json.loads(path.read_bytes())
        except (OSError, ValueError):  # none yet, or garbled: replaced at the next save
            entries = {}
        self.entries: dict[str, list] = entries if isinstance(entries, dict) else {}

    def holds(self, path: Path, h: bytes, s: DataSlice) -> bool:
        state = _state(path)
        return state is not None and self.entries.get(h.hex()) == [*state, _expected(s)]

    def add(self, h: bytes, state: list, s: DataSlice) -> None:
        self.entries[h.hex()] = [*state, _expected(s)]  # one key per thread: no lock needed
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        try:
            atomic_write(self.path, json.dumps(self.entries).encode())
        except OSError:
            pass  # a read-only workspace: the next command checks the files again
