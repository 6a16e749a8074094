"""A 0.39 root's source as the pipeline takes it, its fetch state, and the reference's source
state (``AddData.newSourceState``) of that fetch state.

A root's fetch state (``workspace.source_state.SourceState``: the files a glob took, a URL's
validators, where a pull stopped within a file) is the workspace's own, kept beside the chain
in ``.coord/cache/<name>/state/``. A 0.39 block also records, for a reader of the chain alone,
what the reference has a kind for: ``odf/etag`` (a URL's ETag) or ``odf/last-modified`` (its
Last-Modified time, or a file:// URL's modification time), and for a glob taken by name the
last file's name as an ``odf/etag`` (the reference's own state of a ``FilesGlob``). Anything
else, and a block that ended within a file, records none (the reference would poll from the
start of the source).

A root whose workspace keeps no fetch state for it (its cache lost, or a chain written
elsewhere) is read back from what its chain records, as the reference does (``chain_glob_state``):
a pull goes on from there and ``coord status`` probes from there, so both agree.

A root fed by a File Feed has no source in its chain: its source is coord's extension, kept
beside the chain (``feed_source``); each block records the update it holds in coord's own kind
of source state, from which the chain alone tells the updates consumed (``chain_feed_state``).
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..metadata.objects import (
    DatasetSourceRoot,
    FetchStep,
    FetchStepFileFeed,
    FetchStepFilesGlob,
    SourceOrdering,
)
from ..metadata.odf39 import events as e
from ..metadata.odf39.source import SourceState
from ..workspace.source_state import FeedState, FilesGlobState, UrlState, fingerprint
from ..workspace.source_state import SourceState as FetchState

if TYPE_CHECKING:
    from .dataset import CurrentDataset
    from .read import DatasetState

SOURCE_NAME = "default"  # the reference's name for a polling source's state
ETAG = "odf/etag"  # the reference's kind of a URL's ETag, and of the last file a glob took


def pulled_source(ds: CurrentDataset, s: DatasetState) -> DatasetSourceRoot | None:
    """The source a pull of the 0.39 root ``ds`` fetches from: its polling source in force, else
    the File Feed source kept beside its chain (None: neither, nothing to fetch)."""
    from .feed_source import kept_feed_source

    if s.polling_source is not None:
        return root_source(ds.id, s)
    return kept_feed_source(ds.ws, ds.id)


def root_source(name: str, s: DatasetState) -> DatasetSourceRoot:
    """A 0.39 root's polling source in force as the 0.18 source the ingest pipeline's steps
    take (``ingest.current``, ``coord status``)."""
    from ..metadata.odf39.adapt import adapt_snapshot

    assert s.polling_source is not None
    snapshot = adapt_snapshot(e.DatasetSnapshot(name=name, kind=e.DatasetKind.ROOT,
                                                metadata=[s.polling_source]), "0.39").snapshot
    assert isinstance(snapshot.source, DatasetSourceRoot)
    return snapshot.source


def fetch_state(ds: CurrentDataset, s: DatasetState, fetch: FetchStep) -> FetchState | None:
    """The fetch state committed with the newest block of the chain that has one; when the
    workspace keeps none, the one the chain records (``chain_glob_state``). A state of a block
    the chain does not reach (a pull killed before its head moved) is not read."""
    held = {p.stem for p in ds.state_dir.iterdir()} if ds.state_dir.is_dir() else set()
    newest = next((b.hash for b in reversed(s.blocks) if str(b.hash) in held), None)
    if newest is None:
        if isinstance(fetch, FetchStepFileFeed):
            from .feed_source import chain_feed_state

            feed = chain_feed_state(s, fetch)
            return FetchState(feed) if feed is not None else None
        return chain_glob_state(s, fetch)
    path = ds.state_path(newest)
    return FetchState.from_json(path.read_bytes(), where=f"{ds.id}: {path}", step=fetch)


def by_name(fetch: FetchStep | None) -> bool:
    """Whether ``fetch`` is a glob taken in the order of its files' names, the only order the
    reference takes a glob in."""
    return isinstance(fetch, FetchStepFilesGlob) and fetch.order in (None, SourceOrdering.BY_NAME)


def chain_glob_state(s: DatasetState, fetch: FetchStep) -> FetchState | None:
    """The fetch state of a glob taken by name as the chain records it, the reference's way:
    the newest AddData's ``odf/etag`` names the last file taken (None: that AddData records
    none, or the source is no such glob)."""
    if not by_name(fetch):
        return None
    newest = next((b.block.event for b in reversed(s.blocks) if isinstance(b.block.event, e.AddData)),
                  None)
    recorded = newest.new_source_state if newest is not None else None
    if recorded is None or recorded.kind != ETAG or not recorded.value:
        return None
    return FetchState(FilesGlobState(fingerprint(fetch), recorded.value))


def reference_source_state(stored: FetchState | None) -> SourceState | None:
    """The 0.39 source state of ``stored``, where the reference has a kind for it, or a File
    Feed's update in coord's own kind (``feed_source``)."""
    if stored is None:
        return None
    fetched = stored.fetched
    if stored.resume is None and isinstance(fetched, FeedState):
        from .feed_source import feed_source_state

        return feed_source_state(fetched)
    if stored.resume is not None or not isinstance(fetched, UrlState):
        return None
    if fetched.etag is not None:
        return SourceState(source_name=SOURCE_NAME, kind="odf/etag", value=fetched.etag)
    if fetched.last_modified is not None:
        from email.utils import parsedate_to_datetime  # a pull's: coord status reads no HTTP date

        when = parsedate_to_datetime(fetched.last_modified).astimezone(UTC)
        return _last_modified(int(when.timestamp()) * 10**9)
    if fetched.mtime_ns is not None:
        return _last_modified(fetched.mtime_ns)
    return None


def _last_modified(ns: int) -> SourceState:
    """RFC 3339 in UTC with as many fraction digits as needed (0, 3, 6 or 9), as the
    reference writes it (chrono's ``SecondsFormat::AutoSi``)."""
    seconds, fraction = divmod(ns, 10**9)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    for digits in (0, 3, 6, 9):
        if fraction % 10 ** (9 - digits) == 0:
            text += f".{fraction // 10 ** (9 - digits):0{digits}d}" if digits else ""
            break
    return SourceState(source_name=SOURCE_NAME, kind="odf/last-modified", value=text + "Z")
