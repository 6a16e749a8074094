"""The reference's source state (``AddData.newSourceState``) of a workspace's fetch state.

A root's fetch state (``workspace.source_state.SourceState``: the files a glob took, a URL's
validators, where a pull stopped within a file) is the workspace's own, kept beside the chain
in ``.coord/cache/<name>/state/``. A 0.39 block also records, for a reader of the chain alone,
what the reference has a kind for: ``odf/etag`` (a URL's ETag) or ``odf/last-modified`` (its
Last-Modified time, or a file:// URL's modification time). Anything else, and a block that
ended within a file, records none (the reference would poll from the start of the source).
"""
from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ..metadata.odf39.source import SourceState
from ..workspace.source_state import SourceState as FetchState
from ..workspace.source_state import UrlState

SOURCE_NAME = "default"  # the reference's name for a polling source's state


def reference_source_state(stored: FetchState | None) -> SourceState | None:
    """The 0.39 source state of ``stored``, where the reference has a kind for it."""
    if stored is None:
        return None
    fetched = stored.fetched
    if stored.resume is not None or not isinstance(fetched, UrlState):
        return None
    if fetched.etag is not None:
        return SourceState(source_name=SOURCE_NAME, kind="odf/etag", value=fetched.etag)
    if fetched.last_modified is not None:
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
