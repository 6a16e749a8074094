"""Local sources watched for new files (inotify through ``watchfiles``), so a file dropped
into a root's folder is ingested within about a second instead of at the next poll.

A change only puts the root in the build service's queue: the pull itself decides what is
new (the fetch state), so a spurious or repeated notification costs a pull that finds
nothing. A change is reported once the folder has been quiet for ``QUIET_MS``; a file
written in place slowly could still be caught half-written, so drop files by writing them
under another name (one the glob does not match) and renaming them.
"""
from __future__ import annotations

import fnmatch
import glob
import os
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

from ..metadata.objects import DatasetSource, DatasetSourceRoot, FetchStepContainer, FetchStepFilesGlob

QUIET_MS = 100
GROUP_MS = 500


def watched_pattern(source: DatasetSource, root: Path) -> str | None:
    """The absolute path pattern of a root's local source, or None (a remote URL, a derivative)."""
    if not isinstance(source, DatasetSourceRoot):
        return None
    fetch = source.fetch
    if isinstance(fetch, FetchStepFilesGlob):
        path = fetch.path
    elif isinstance(fetch, FetchStepContainer):  # a program, no file to watch
        return None
    else:
        parsed = urllib.parse.urlparse(fetch.url)
        if parsed.scheme not in ("", "file"):
            return None
        path = urllib.request.url2pathname(parsed.path if parsed.scheme else fetch.url)
    return path if os.path.isabs(path) else str(root / path)


def folder_to_watch(pattern: str) -> Path:
    """The deepest existing folder above every path ``pattern`` can match."""
    parts = Path(pattern).parts
    fixed = Path(*parts[:next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts) - 1)])
    while not fixed.is_dir() and fixed != fixed.parent:
        fixed = fixed.parent
    return fixed


class FolderWatch:
    """Calls ``changed(dataset ids)`` from its own thread when files matching their patterns
    are created or modified."""

    def __init__(self, patterns: dict[str, str], changed: Callable[[list[str]], object]):
        self.patterns, self._changed = patterns, changed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="folder-watch", daemon=True)

    def start(self) -> None:
        if self.patterns:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def matching(self, paths: Iterable[str]) -> list[str]:
        paths = list(paths)
        return sorted(d for d, pattern in self.patterns.items()
                      if any(fnmatch.fnmatchcase(p, pattern) for p in paths))

    def _run(self) -> None:
        from watchfiles import watch

        folders = sorted({folder_to_watch(p) for p in self.patterns.values()})
        for changes in watch(*folders, watch_filter=None, debounce=GROUP_MS, step=QUIET_MS,
                             stop_event=self._stop, raise_interrupt=False):
            ids = self.matching(path for _, path in changes)
            if ids:
                self._changed(ids)
