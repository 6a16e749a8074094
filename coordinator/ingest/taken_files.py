"""Files a ``filesGlob`` source has taken, remembered so that one changed afterwards is named.

A filesGlob source takes each file once, in its order, and never reads a file at or before the
last one taken again (its progress is that last file). So records added to a file after it was
ingested (a monthly file that keeps growing, a file rewritten in place) are silently left out.
This cache remembers the size and modification time of every file taken, and a pull that finds
a taken file changed says so, with what to do.

- ``.coord/cache/<id>/taken-files.json``: ``{path: [size, mtime_ns]}``, the path relative to
  the workspace root as the glob matched it.
- It is advice only, never progress: a lost or garbled cache names nothing; a changed file is
  named once, then its new state is remembered; a crash before the cache is written after a
  commit only loses the entries of that pull.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..metadata.objects import FetchStepFilesGlob, MergeStrategy, MergeStrategySnapshot
from ..workspace import Workspace, layout
from ..workspace.fsutil import atomic_write
from .fetch import glob_paths
from .fetched import FetchedFile


class TakenFiles:
    def __init__(self, ws: Workspace, dataset_id: str):
        self._root = ws.root
        self._path = ws.meta / layout.cache_dir(dataset_id, layout.TAKEN_FILES)
        try:
            entries = json.loads(self._path.read_bytes())
        except (OSError, ValueError):
            entries = {}
        self._entries: dict[str, list[int]] = entries if isinstance(entries, dict) else {}

    def changed(self, step: FetchStepFilesGlob, merge: MergeStrategy,
                fetched: list[FetchedFile]) -> list[str]:
        """One note per file taken before that has changed since (those ``fetched`` now are
        being taken again anyway); each is remembered in its new state."""
        taking = {self._key(f.path) for f in fetched}
        notes = []
        for path in glob_paths(step, self._root):
            key = self._key(path)
            was = self._entries.get(key)
            if was is None or key in taking or was == (now := _stat(path)):
                continue
            self._entries[key] = now
            notes.append(f"{key} changed after it was ingested and is not read again: {_advice(merge)}")
        return notes

    def remember(self, files: list[FetchedFile]) -> None:
        """``files`` were ingested (committed): their state as of now."""
        for f in files:
            self._entries[self._key(f.path)] = _stat(f.path)
        try:
            atomic_write(self._path, json.dumps(self._entries, sort_keys=True).encode())
        except OSError:
            pass  # advice only: a cache that cannot be written names nothing next time

    def _key(self, path: Path) -> str:
        return path.relative_to(self._root).as_posix() if path.is_relative_to(self._root) else str(path)


def _stat(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def _advice(merge: MergeStrategy) -> str:
    if isinstance(merge, MergeStrategySnapshot):
        return "a filesGlob source takes each file once; put the new snapshot in a new file"
    return ("a filesGlob source takes each file once; put new records in a new file (or, to take "
            "changed rows, a ledger or snapshot merge over new files)")
