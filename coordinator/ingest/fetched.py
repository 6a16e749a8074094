"""A file a fetch step brought, as the later steps of an ingest see it (``fetch.py`` for the
``url`` and ``filesGlob`` steps, ``fetch_feed.py`` for ``fileFeed``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass
class FetchedFile:
    path: Path  # local bytes, as the source gave them
    name: str  # how messages call it: the file name, or the URL
    event_time: datetime | None  # from metadata or path; None when the source has none
    # source state once this file is ingested; a value may still be computing (a Future)
    state: dict = field(default_factory=dict)
    batch: str | None = None  # files of one batch (a feed update) are ingested as one block

    def source_state(self) -> dict:
        """The state to store with the block, once the file has been read.

        Waits for a content hash still being computed. A local file that changed since it
        was fetched loses its hash, so the next fetch takes it again instead of comparing
        with a hash of other bytes than those ingested.
        """
        from concurrent.futures import Future

        state = {k: v.result() if isinstance(v, Future) else v for k, v in self.state.items()}
        if "mtime_ns" in state:
            try:
                st = self.path.stat()
                unchanged = (st.st_mtime_ns, st.st_size) == (state["mtime_ns"], state["size"])
            except OSError:
                unchanged = False
            if not unchanged:
                state.pop("sha256", None)
        return state
