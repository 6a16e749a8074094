"""Which local data files are known to hold exactly the slice their block records.

``trust/slice_check.py`` checks a slice before anything reads it, and remembers a file found
good here; a commit remembers the files it installs, whose bytes it wrote and hashed itself
(or, from a repository, checked before installing), so what a pull writes is not hashed again
by the first read after it.

- An entry is ``{block hex: [path, dev, inode, size, mtime_ns, ctime_ns, expected hash]}`` in
  ``.coord/cache/<id>/checked-slices.json``; a current-ODF (0.39) dataset's entries are keyed by
  its block's multihash (``f1620...``) and expect the data file's physical multihash
  (``holds_file``/``add_file``: the cache knows no ODF version, only names and states).
  While a file's identity and state stay the same it is not read again. Rewriting a file in
  place changes its mtime and ctime, and replacing it changes its inode and ctime (``touch -d``
  cannot set ctime back), so either is checked again.
- The cache is only a shortcut: it is replaced atomically but not made durable (a crash may
  lose it), and a lost, unreadable or garbled one means the files are checked again and the
  cache is rewritten; a failed write costs nothing more.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..metadata.objects import DataSlice
from . import layout
from .fsutil import tmp_name

if TYPE_CHECKING:
    from .dataset import Dataset
    from .workspace import Workspace


def file_state(path: Path) -> list | None:
    """The file's identity and state, as remembered: None when it cannot be seen."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def expected_hash(s: DataSlice) -> str:
    """The hash a file is checked against: the physical one, else the logical one."""
    return s.physical_hash.hex() if s.physical_hash is not None else f"logical:{s.hash.hex()}"


class DatasetPlace(Protocol):
    """What the cache needs of a dataset of either ODF version: its workspace and name."""

    @property
    def ws(self) -> Workspace: ...

    @property
    def id(self) -> str: ...


class SliceCache:
    """The files of one dataset known good (see the module doc)."""

    def __init__(self, ds: DatasetPlace):
        self.path = ds.ws.meta / layout.cache_dir(ds.id, layout.CHECKED_SLICES)
        self.changed = False
        try:
            entries = json.loads(self.path.read_bytes())
        except (OSError, ValueError):  # none yet, or garbled: replaced at the next save
            entries = {}
        self.entries: dict[str, list] = entries if isinstance(entries, dict) else {}

    def add(self, h: bytes, state: list, s: DataSlice) -> None:
        self.add_file(h.hex(), state, expected_hash(s))

    def holds_file(self, path: Path, key: str, expected: str) -> bool:
        """Whether the file at ``path``, as it is now, was found to hash to ``expected``."""
        state = file_state(path)
        return state is not None and self.entries.get(key) == [*state, expected]

    def add_file(self, key: str, state: list, expected: str) -> None:
        self.entries[key] = [*state, expected]  # one key per thread: no lock needed
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        tmp = tmp_name(self.path.parent)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(json.dumps(self.entries).encode())
            os.replace(tmp, self.path)
        except OSError:  # a read-only workspace: the next command checks the files again
            tmp.unlink(missing_ok=True)


def remember_installed(ds: Dataset, slices: list[tuple[bytes, DataSlice]]) -> None:
    """Remember the data files a commit has just installed for these (block, slice) pairs."""
    if not slices:
        return
    cache = SliceCache(ds)
    for h, s in slices:
        state = file_state(ds.data_file(h))
        if state is not None:
            cache.add(h, state, s)
    cache.save()
