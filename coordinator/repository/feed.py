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
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..metadata.objects import SuccessMarker
from ..metadata.timefmt import UTC
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
    markers: set[str] = set()
    strays: set[str] = set()
    for path, size in list_objects(io).items():
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
            markers.add(prefix)
        elif not _hidden(rest):
            files["/".join(rest)] = size
    updates = [
        Update(prefix=p, partition=p.rpartition("/")[0], name=p.rpartition("/")[2],
               files=dict(sorted(files.items())), has_marker=p in markers)
        for p, files in by_prefix.items()
    ]
    updates.sort(key=lambda u: (u.name, u.partition))
    return Listing(updates, sorted(strays))


def _hidden(parts: list[str]) -> bool:
    return any(p.startswith(("_", ".")) for p in parts)


def list_objects(io: FileIO) -> dict[str, int]:
    """Every file under the location (relative path → size). On S3 one flat listing
    (ListObjectsV2 pages of 1000 keys), not a walk folder by folder."""
    if isinstance(io, S3FileIO):
        start = len(io.prefix) + 1 if io.prefix else 0
        pages = io.client.get_paginator("list_objects_v2").paginate(
            Bucket=io.bucket, Prefix=f"{io.prefix}/" if io.prefix else "")
        return {o["Key"][start:]: o["Size"] for page in pages for o in page.get("Contents", ())}
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


def judge(io: FileIO, update: Update, marker: SuccessMarker | None) -> Verdict:
    """Whether the update may be consumed; reads ``_SUCCESS`` for count markers."""
    if not update.has_marker:
        return Verdict(UpdateStatus.PENDING, "no _SUCCESS yet")
    if marker is SuccessMarker.HADOOP:
        return Verdict(UpdateStatus.COMPLETE)
    try:
        raw = io.read_bytes(update.path(MARKER), _MARKER_LIMIT)
    except TooLarge:
        return Verdict(UpdateStatus.INVALID, f"_SUCCESS is larger than {_MARKER_LIMIT} bytes, "
                                             "no file count (set successMarker: hadoop?)")
    if raw is None:  # removed between the listing and the read
        return Verdict(UpdateStatus.PENDING, "no _SUCCESS yet")
    text = raw.decode(errors="replace").strip()
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


def write_update(io: FileIO, prefix: str, parts: list[tuple[str, Path]], manifest: bytes,
                 on_bytes: Callable[[int], None]) -> None:
    """Write one update: the data files, ``_coord.json``, then ``_SUCCESS`` with the count.

    Each file appears whole (FileIO). An interruption leaves an update without ``_SUCCESS``,
    which readers ignore and the next call with the same prefix completes.
    """
    for name, local in parts:
        io.put_file(local, f"{prefix}/{name}", on_bytes)
    io.write_bytes(f"{prefix}/{MANIFEST}", manifest)
    io.write_bytes(f"{prefix}/{MARKER}", str(len(parts)).encode())
