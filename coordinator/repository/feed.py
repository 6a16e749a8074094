"""The File Feed convention on a folder or a bucket prefix: listing, validating, writing updates.

A feed location holds one prefix per update, named by its creation time ``YYYYMMDD.HHMMSS``
(UTC), optionally below ``partitions`` levels of partition folders
(``v1.0/2018-05-20/20180521.160000/``). An update holds its data files and, once its
producer finished, a ``_SUCCESS`` marker written last.

Invariants the readers and the writer rely on (docs/feeds.md):

- Data files are the files of an update whose path has no component starting with ``_`` or
  ``.`` (Hadoop's hidden-file rule: ``_SUCCESS``, ``_coord.json``, ``.crc`` files and
  ``_temporary/`` are not data).
- Count markers: ``_SUCCESS`` holds the number of data files. Fewer listed than it says is a
  store still catching up (``SHORT``); more listed (the convention invalidates an update by
  adding an empty file) or a marker that is no number is ``INVALID``. Hadoop markers: the
  marker's presence completes the update, whatever it holds (Spark writes it empty).
- The writer puts the data files and ``_coord.json`` first and ``_SUCCESS`` last, so a reader
  following the convention never takes a partial update; rewriting an update without its
  marker is how an interrupted publish is finished.
"""
from __future__ import annotations

import enum
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..metadata.objects import SuccessMarker
from ..metadata.timestamps import UTC
from .fileio import FileIO, LocalFileIO, S3FileIO, TooLarge

MARKER = "_SUCCESS"
MANIFEST = "_coord.json"
UPDATE_FORMAT = "%Y%m%d.%H%M%S"
_UPDATE_NAME = re.compile(r"\d{8}\.\d{6}")
_MARKER_LIMIT = 64  # bytes: a count is a few digits


class UpdateStatus(enum.Enum):
    COMPLETE = "complete"
    PENDING = "pending"  # no _SUCCESS yet
    SHORT = "short"  # _SUCCESS names more files than are listed yet
    INVALID = "invalidated"


@dataclass(frozen=True)
class Update:
    prefix: str  # relative to the feed location, "/"-separated: "2018-05-20/20180521.160000"
    partition: str  # "" for an unpartitioned feed
    name: str  # "20180521.160000"
    files: dict[str, int]  # data file (relative to the update) → size, sorted by name
    has_marker: bool
    marker_etag: str | None = None  # S3: the listed ETag of _SUCCESS (MD5 of a plain upload)

    @property
    def time(self) -> datetime:
        return datetime.strptime(self.name, UPDATE_FORMAT).replace(tzinfo=UTC)

    def path(self, file: str) -> str:
        return f"{self.prefix}/{file}"


@dataclass(frozen=True)
class Verdict:
    status: UpdateStatus
    reason: str = ""  # why not complete, in words


@dataclass(frozen=True)
class Listing:
    updates: list[Update]  # ordered by (name, partition): creation time, oldest first
    strays: list[str]  # folders where an update was expected but whose name is none


def update_name(t: datetime) -> str:
    return t.astimezone(UTC).strftime(UPDATE_FORMAT)


def list_feed(io: FileIO, partitions: int = 0) -> Listing:
    """Every update of the feed, from one listing of the location."""
    by_prefix: dict[str, dict[str, int]] = {}
    markers: dict[str, str | None] = {}
    strays: set[str] = set()
    etags: dict[str, str] = {}
    for path, size in list_objects(io, etags).items():
        parts = path.split("/")
        if len(parts) < partitions + 2 or _hidden(parts[:partitions + 1]):
            continue  # not inside an update folder (a stray file, a _temporary folder)
        prefix = "/".join(parts[:partitions + 1])
        if not _UPDATE_NAME.fullmatch(parts[partitions]):
            strays.add(prefix)
            continue
        files = by_prefix.setdefault(prefix, {})
        rest = parts[partitions + 1:]
        if rest == [MARKER]:
            markers[prefix] = etags.get(path)
        elif not _hidden(rest):
            files["/".join(rest)] = size
    updates = [
        Update(prefix=p, partition=p.rpartition("/")[0], name=p.rpartition("/")[2],
               files=dict(sorted(files.items())), has_marker=p in markers,
               marker_etag=markers.get(p))
        for p, files in by_prefix.items()
    ]
    updates.sort(key=lambda u: (u.name, u.partition))
    return Listing(updates, sorted(strays))


def _hidden(parts: list[str]) -> bool:
    return any(p.startswith(("_", ".")) for p in parts)


def list_objects(io: FileIO, etags: dict[str, str] | None = None) -> dict[str, int]:
    """Every file under the location (relative path → size). On S3 one flat listing
    (ListObjectsV2 pages of 1000 keys), not a walk folder by folder; ``etags`` receives
    the ETags of the ``_SUCCESS`` objects listed."""
    if isinstance(io, S3FileIO):
        start = len(io.prefix) + 1 if io.prefix else 0
        pages = io.client.get_paginator("list_objects_v2").paginate(
            Bucket=io.bucket, Prefix=f"{io.prefix}/" if io.prefix else "")
        found = {}
        for page in pages:
            for o in page.get("Contents", ()):
                key = o["Key"]
                if key.endswith("/"):  # an empty folder object (consoles, pyarrow), not a file
                    continue
                found[key[start:]] = o["Size"]
                if etags is not None and key.endswith(f"/{MARKER}"):
                    etags[key[start:]] = o.get("ETag", "").strip('"')
        return found
    if isinstance(io, LocalFileIO):
        root = Path(io.root)
        found = {}
        for folder, _, names in os.walk(root):
            rel = os.path.relpath(folder, root)
            for n in names:
                full = os.path.join(folder, n)
                if os.path.isfile(full) and not os.path.islink(full):  # links could lead outside
                    found[n if rel == "." else f"{rel}/{n}".replace(os.sep, "/")] = \
                        os.path.getsize(full)
        return found
    return io.list_files("")


def read_markers(io: FileIO, updates: list[Update]) -> dict[str, bytes | None]:
    """The ``_SUCCESS`` bytes of these updates (None: gone since listed), read in parallel.

    A marker whose listed ETag is the MD5 of the expected count holds that count (a plain S3
    upload's ETag is its MD5): no GET. Others take one small GET each, in parallel.
    A marker longer than a count is read as its first bytes only (and judged no count).
    """
    from concurrent.futures import ThreadPoolExecutor

    def read(u: Update) -> bytes | None:
        expected = str(len(u.files)).encode()
        if u.marker_etag == hashlib.md5(expected, usedforsecurity=False).hexdigest():
            return expected  # the listing already shows the marker holds the count
        if isinstance(io, S3FileIO):  # one GET (pyarrow would ask for the size first)
            client = io.client
            try:
                obj = client.get_object(Bucket=io.bucket, Key=io._key(u.path(MARKER)),
                                        Range=f"bytes=0-{_MARKER_LIMIT}")
            except client.exceptions.NoSuchKey:
                return None
            with obj["Body"] as body:
                return body.read()
        try:
            return io.read_bytes(u.path(MARKER), _MARKER_LIMIT)
        except TooLarge:
            return b"?" * (_MARKER_LIMIT + 1)

    wanted = [u for u in updates if u.has_marker]
    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip((u.prefix for u in wanted), pool.map(read, wanted), strict=True))


def judge(update: Update, marker: SuccessMarker | None, content: bytes | None) -> Verdict:
    """Whether the update may be consumed, given its ``_SUCCESS`` bytes (``read_markers``)."""
    if not update.has_marker or content is None:
        return Verdict(UpdateStatus.PENDING, "no _SUCCESS yet")
    if marker is SuccessMarker.HADOOP:
        return Verdict(UpdateStatus.COMPLETE)
    text = content.decode(errors="replace").strip()
    if not re.fullmatch(r"[0-9]{1,9}", text):
        hint = " (a Spark/Hadoop marker? set successMarker: hadoop)" if not text else ""
        return Verdict(UpdateStatus.INVALID, f"_SUCCESS holds no file count{hint}")
    count = int(text)
    listed = len(update.files)
    if listed < count:
        return Verdict(UpdateStatus.SHORT, f"_SUCCESS says {count} files, {listed} listed so far")
    if listed > count:
        return Verdict(UpdateStatus.INVALID, f"{listed} files listed, _SUCCESS says {count}")
    return Verdict(UpdateStatus.COMPLETE)


def complete_update(io: FileIO, prefix: str, parts: int) -> None:
    """Mark an update whose ``parts`` data files (and ``_coord.json``) are written complete:
    ``_SUCCESS`` with the count, written last. Until then readers ignore the update; a writer
    interrupted before this rewrites the update and calls it again."""
    io.write_bytes(f"{prefix}/{MARKER}", str(parts).encode())
