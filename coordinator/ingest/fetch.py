"""Fetch step: find what is new at the source and make it a local file.

Each fetched file comes with its event time (from the file's metadata or its path) and the
fetch step's progress once it has been ingested (a ``FetchState``: ``UrlState``,
``FilesGlobState`` or ``FeedState``, see ``workspace/source_state.py``). The state lives
beside the committed block (``commit(source_state=...)``), so progress moves exactly when data
does: a crash before the commit leaves the old state and the next pull fetches the same files
again. A state carries the fingerprint of the step that made it: when the step changes, old
progress no longer applies. ``sha256`` only tells an unchanged source from a changed one;
SHA-256 is hardware-accelerated here, a third of the cost of SHA3.

``filesGlob`` paths are relative to the workspace root (the folder holding ``.coord``), not to
the current directory nor the manifest, so a pull means the same wherever it is started.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.objects import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    FetchStep,
    FetchStepContainer,
    FetchStepFileFeed,
    FetchStepFilesGlob,
    FetchStepUrl,
    SourceOrdering,
)
from ..metadata.timestamps import UTC
from ..workspace.progress import NoProgress, Progress
from ..workspace.source_state import (
    FeedState,
    FetchState,
    FilesGlobState,
    UrlState,
    fingerprint,
    progress_of,
)
from .errors import IngestError
from .fetched import FetchedFile
from .time_patterns import to_strftime

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

_CHUNK = 1 << 20
_TIMEOUT_S = 60


@functools.cache
def _background() -> ThreadPoolExecutor:
    """The thread hashing fetched files (made on first use: status probes need none)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="fetch-hash")


def fetch(step: FetchStep, *, root: Path, scratch: Path, state: FetchState | None,
          progress: Progress | None = None, notes: list[str] | None = None) -> list[FetchedFile]:
    """The new files in ingest order; empty when nothing changed since ``state`` (the
    progress stored with the newest block; one an earlier fetch step made is not taken).

    ``notes`` receives what the user should hear about the source (a feed's invalidated
    updates), one line each.
    """
    progress = progress or NoProgress()
    if isinstance(step, FetchStepFileFeed):
        from . import fetch_feed

        io, feed_plan = fetch_feed.plan(step, progress_of(FeedState, step, state))
        if notes is not None:
            notes += feed_plan.notes
        return fetch_feed.download(io, feed_plan, scratch, progress)
    if isinstance(step, FetchStepFilesGlob):
        return _fetch_glob(step, root, progress_of(FilesGlobState, step, state))
    if isinstance(step, FetchStepContainer):
        from .fetch_container import fetch_container

        return fetch_container(step, root=root, scratch=scratch, state=state)
    if urllib.parse.urlparse(step.url).scheme in ("", "file"):
        return _fetch_local_url(step, root, progress_of(UrlState, step, state))
    return _fetch_http(step, scratch, progress_of(UrlState, step, state), progress)


def probe(step: FetchStep, *, root: Path, state: FetchState | None) -> list[str] | None:
    """The files a pull would ingest now, found without downloading anything (``coord
    status``): local files by the stat and hash the state records; None for a remote URL,
    which only a request could tell (unless its ``cache`` says it is fetched once), and for a
    container, which only a run could."""
    if isinstance(step, FetchStepContainer):
        return None
    if isinstance(step, FetchStepFileFeed):  # a listing, no download
        from .fetch_feed import plan

        feed_plan = plan(step, progress_of(FeedState, step, state))[1]
        return [f"{u.prefix}/ ({len(u.files)} files)" for u in feed_plan.take]
    if isinstance(step, FetchStepUrl) and urllib.parse.urlparse(step.url).scheme not in ("", "file"):
        fetched_once = step.cache is not None and progress_of(UrlState, step, state) is not None
        if not fetched_once:
            return None
    return [f.name for f in fetch(step, root=root, scratch=root, state=state)]


# --- url ---------------------------------------------------------------------------------------


def _fetch_local_url(step: FetchStepUrl, root: Path, state: UrlState | None) -> list[FetchedFile]:
    parsed = urllib.parse.urlparse(step.url)
    # what urllib.request.url2pathname does on POSIX, without importing http.client and ssl
    path = root / urllib.parse.unquote(parsed.path if parsed.scheme else step.url)
    if step.cache is not None and state is not None:
        return []  # cache forever: fetched once, never again
    try:
        st = path.stat()
    except OSError as e:
        raise IngestError(f"fetch {step.url}: {e.strerror}") from None
    if state is not None and (state.mtime_ns, state.size) == (st.st_mtime_ns, st.st_size):
        return []
    content_hash, pending = None, None
    if state is not None and state.size == st.st_size:  # touched, maybe changed: compare the bytes
        content_hash = _file_hash(path)
        if state.sha256 == content_hash:
            return []
    else:  # changed: the new state's hash is computed while the file is read
        pending = _background().submit(_file_hash, path)
    mtime = datetime.fromtimestamp(st.st_mtime, UTC)
    return [FetchedFile(
        path=path, name=path.name, event_time=_event_time(step, str(path), mtime),
        state=UrlState(fingerprint(step), sha256=content_hash, mtime_ns=st.st_mtime_ns,
                       size=st.st_size),
        sha256=pending,
    )]


def _fetch_http(step: FetchStepUrl, scratch: Path, state: UrlState | None,
                progress: Progress) -> list[FetchedFile]:
    import email.utils
    import urllib.error
    import urllib.request

    if step.cache is not None and state is not None:
        return []
    headers = {"User-Agent": "odf-coordinator"}
    if state is not None and state.etag:
        headers["If-None-Match"] = state.etag
    if state is not None and state.last_modified:
        headers["If-Modified-Since"] = state.last_modified
    request = urllib.request.Request(step.url, headers=headers)
    target = scratch / (Path(urllib.parse.urlparse(step.url).path).name or "download")
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            content_hash = _download(response, target, step.url, progress)
            etag = response.headers.get("ETag")
            last_modified = response.headers.get("Last-Modified")
    except urllib.error.HTTPError as e:
        if e.code == 304:
            return []
        raise IngestError(f"fetch {step.url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise IngestError(f"fetch {step.url}: {getattr(e, 'reason', e)}") from None
    if state is not None and state.sha256 == content_hash:
        return []  # a server without validators sent the same bytes again
    modified = email.utils.parsedate_to_datetime(last_modified) if last_modified else None
    if isinstance(step.event_time, EventTimeSourceFromMetadata) and modified is None:
        raise IngestError(f"fetch {step.url}: eventTime fromMetadata, but the server sent no "
                          "Last-Modified header")
    return [FetchedFile(path=target, name=step.url,
                        event_time=_event_time(step, step.url, modified),
                        state=UrlState(fingerprint(step), sha256=content_hash, etag=etag,
                                       last_modified=last_modified))]


def _download(response, target: Path, url: str, progress: Progress) -> str:
    length = response.headers.get("Content-Length")
    progress.start(int(length) if length else None, f"GET {url}")
    h = hashlib.sha256()
    try:
        with open(target, "wb") as out:
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                h.update(chunk)
                progress.advance(len(chunk))
    finally:
        progress.finish()
    return h.hexdigest()


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# --- filesGlob ---------------------------------------------------------------------------------


def _fetch_glob(step: FetchStepFilesGlob, root: Path,
                state: FilesGlobState | None) -> list[FetchedFile]:
    paths = glob_paths(step, root)
    if not paths and state is None:
        raise IngestError(f"fetch: no files match {step.path!r} (relative to {root})")
    fp, files = fingerprint(step), []
    for p in paths:
        event_time = _event_time(step, str(p), datetime.fromtimestamp(p.stat().st_mtime, UTC))
        files.append(FetchedFile(path=p, name=p.name, event_time=event_time,
                                 state=FilesGlobState(fp, p.name, event_time)))
    by_time = step.order is SourceOrdering.BY_EVENT_TIME
    if by_time and any(f.event_time is None for f in files):
        raise IngestError("fetch: order byEventTime needs an eventTime source")

    def key(f: FetchedFile) -> tuple:
        return (f.event_time, f.name) if by_time else (f.name,)

    files.sort(key=key)
    if state is not None:
        if by_time and state.last_event_time is None:  # the step orders by time: it wrote one
            raise IngestError(f"fetch: the source state names {state.last_file!r} without its "
                              "event time, which order byEventTime needs")
        last = (state.last_event_time, state.last_file) if by_time else (state.last_file,)
        files = [f for f in files if key(f) > last]
    return files


def glob_paths(step: FetchStepFilesGlob, root: Path) -> list[Path]:
    """The files the glob matches now (relative patterns: to the workspace root)."""
    pattern = step.path if os.path.isabs(step.path) else str(root / step.path)
    return [Path(p) for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)]


# --- event time --------------------------------------------------------------------------------


def _event_time(step: FetchStepUrl | FetchStepFilesGlob, path: str,
                modified: datetime | None) -> datetime | None:
    source = step.event_time
    if isinstance(source, EventTimeSourceFromMetadata):
        return modified
    if isinstance(source, EventTimeSourceFromPath):
        return event_time_from_path(source, path)
    return None


def event_time_from_path(source: EventTimeSourceFromPath, path: str) -> datetime:
    m = re.search(source.pattern, path)
    if not m or not m.groups():
        raise IngestError(f"eventTime fromPath: pattern {source.pattern!r} (group 1 is the time) "
                          f"does not match {path!r}")
    fmt = to_strftime(source.timestamp_format or "%Y-%m-%d")
    try:
        t = datetime.strptime(m.group(1), fmt)
    except ValueError:
        raise IngestError(f"eventTime fromPath: {m.group(1)!r} in {path!r} does not match "
                          f"timestampFormat {fmt!r}") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
