"""A file a fetch step brought, as the later steps of an ingest see it (``fetch.py`` for the
``url`` and ``filesGlob`` steps, ``fetch_feed.py`` for ``fileFeed``)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..workspace.source_state import FetchState, UrlState

if TYPE_CHECKING:
    from concurrent.futures import Future


@dataclass(frozen=True)
class FetchedFile:
    path: Path  # local bytes, as the source gave them
    name: str  # how messages call it: the file name, or the URL
    event_time: datetime | None  # from metadata or path; None when the source has none
    state: FetchState | None  # the fetch step's progress once this file is ingested (None: pushed)
    batch: str | None = None  # files of one batch (a feed update) are ingested as one block
    sha256: Future[str] | None = None  # a url state's content hash, still being computed

    def source_state(self) -> FetchState | None:
        """The state to store with the block, once the file has been read.

        Waits for a content hash still being computed. A local file that changed since it
        was fetched loses its hash, so the next fetch takes it again instead of comparing
        with a hash of other bytes than those ingested.
        """
        state = self.state
        if not isinstance(state, UrlState):
            return state
        if self.sha256 is not None:
            state = dataclasses.replace(state, sha256=self.sha256.result())
        if state.mtime_ns is not None:
            try:
                st = self.path.stat()
                unchanged = (st.st_mtime_ns, st.st_size) == (state.mtime_ns, state.size)
            except OSError:
                unchanged = False
            if not unchanged:
                state = dataclasses.replace(state, sha256=None)
        return state
