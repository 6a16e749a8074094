"""The source state a root dataset's ingest stores with a block: what its fetch step had taken
once the block was in, and where a pull stopped within a file (docs/architecture.md, Ingest).

Stored as ``.coord/cache/<id>/state/<block hash>.json`` (``layout.state_file``), one JSON
object with sorted keys. ``SourceState`` is that object, typed and frozen; ``from_json`` and
``to_json`` are the only places that read and write the format, which is the one ingest has
always stored, so a workspace made earlier reads the same and a state written now is
byte-identical to what earlier versions wrote for the same facts:

- ``fetch``: a fingerprint of what the fetch step that wrote it takes (``fingerprint``):
  for a glob its path and order (and event time source, when ordered by it), for a URL the
  URL. When that changes, the progress it made no longer applies; a change that does not
  change what is taken (a cache setting, a default written out) keeps it, so an append
  source never takes the same files twice. Earlier versions fingerprinted the whole step;
  such a state still applies to that same step.
- one fetch kind's fields (``FetchState``): ``url`` → ``UrlState`` (``etag`` /
  ``last_modified`` / ``sha256`` over http, ``mtime_ns`` / ``size`` / ``sha256`` for a file://
  URL), ``filesGlob`` → ``FilesGlobState`` (``last_file``, ``last_event_time``), ``fileFeed``
  → ``FeedState`` (``update``, ``files``, ``consumed``, ``superseded``).
- ``resume: {file, records, of}`` (``Resume``) when the block ended within a file or a
  feed's update: skip ``records`` records of ``file`` if it is still the one described by
  ``of`` (``FileIdentity``: its own state, its size, its modification time if read in place).

A first pull stopped within its first file stores no fetch fields at all (``fetched`` is
None): only the resume point, or nothing (``{}``). A state is read against the source in
force: one written for this very fetch step (same fingerprint) must be of its kind; one of
an earlier step, whatever its kind, is kept as it is and no longer applies. A file that is
not such a state is refused in one line naming the dataset and the file.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import CoordError
from ..metadata.timestamps import TimeParseError, format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from ..metadata.objects import FetchStep


class SourceStateError(CoordError):
    pass


@dataclass(frozen=True)
class UrlState:
    """``fetch: url``: over http(s) the validators the server sent and the content's hash; for
    a file:// URL (or a path) the file's modification time, size and hash, the hash left out
    when the file changed while it was read (the next pull takes it again)."""

    KIND: ClassVar[str] = "url"
    fetch: str  # the fetch step's fingerprint
    sha256: str | None = None  # tells unchanged bytes from changed ones
    etag: str | None = None  # http: the ETag and Last-Modified headers, as sent
    last_modified: str | None = None
    mtime_ns: int | None = None  # file://
    size: int | None = None


@dataclass(frozen=True)
class FilesGlobState:
    """``fetch: filesGlob``: the last file taken, in the glob's order (by name, or by event
    time and then name)."""

    KIND: ClassVar[str] = "filesGlob"
    fetch: str
    last_file: str
    last_event_time: datetime | None = None  # the file's event time, if the source has one


UNKNOWN_COUNT = -1  # a consumed update whose number of data files is not recorded


@dataclass(frozen=True)
class FeedState:
    """``fetch: fileFeed`` (``ingest/fetch_feed.py``): the update a block was read from and what
    the feed's consumer has settled so far."""

    KIND: ClassVar[str] = "fileFeed"
    fetch: str
    update: str  # the update's prefix
    files: tuple[str, ...]  # its data files, as listed: the block's provenance
    # every ingested update → its number of data files (UNKNOWN_COUNT: read back from a 0.39
    # chain, which records the update alone: store.feed_source)
    consumed: tuple[tuple[str, int], ...]
    superseded: tuple[str, ...]  # updates passed over for a newer one of their partition

    def __post_init__(self) -> None:  # one form per set of facts, so equal facts compare equal
        object.__setattr__(self, "consumed", tuple(sorted(self.consumed)))
        object.__setattr__(self, "superseded", tuple(sorted(self.superseded)))


FetchState = UrlState | FilesGlobState | FeedState
_KINDS: tuple[type[FetchState], ...] = (UrlState, FilesGlobState, FeedState)
_FIELDS: dict[type, frozenset[str]] = {
    UrlState: frozenset({"sha256", "etag", "last_modified", "mtime_ns", "size"}),
    FilesGlobState: frozenset({"last_file", "last_event_time"}),
    FeedState: frozenset({"update", "files", "consumed", "superseded"}),
}


@dataclass(frozen=True)
class FileIdentity:
    """What tells a file apart from a changed one: its source state, its size, and for a file
    read in place (not downloaded) its modification time."""

    state: FetchState
    size: int
    mtime_ns: int | None = None


@dataclass(frozen=True)
class Resume:
    file: str  # the file's name, as the fetch step names it
    records: int  # of its records already ingested
    of: FileIdentity


@dataclass(frozen=True)
class SourceState:
    """What a block stores: the fetch step's progress (None before any) and where to resume."""

    fetched: FetchState | None
    resume: Resume | None = None

    def to_json(self) -> bytes:
        """The stored bytes (sorted keys, as always)."""
        out = _render(self.fetched) if self.fetched is not None else {}
        if self.resume is not None:
            r = self.resume
            out["resume"] = {"file": r.file, "records": r.records, "of": {
                "state": _render(r.of.state), "size": r.of.size,
                **({"mtime_ns": r.of.mtime_ns} if r.of.mtime_ns is not None else {})}}
        return json.dumps(out, sort_keys=True).encode()

    @staticmethod
    def from_json(data: bytes, *, where: str, step: FetchStep | None = None) -> SourceState:
        """Parse a stored state; ``where`` names it in an error (the dataset and the file).
        With ``step`` (the source's fetch step in force), a state written for that step must
        be of its kind."""
        try:
            try:
                raw = json.loads(data)
            except (ValueError, UnicodeDecodeError) as e:
                raise _Bad(f"not JSON ({e})") from None
            top = _Object(raw, "the state")
            resume = top.take("resume", dict, required=False)
            rest = {k: v for k, v in top.raw.items() if k != "resume"}
            state = SourceState(_parse(rest, "the state") if rest else None,
                                _resume(resume) if resume is not None else None)
            own = fingerprints(step) if step is not None else frozenset()
            for s in (state.fetched, state.resume.of.state if state.resume else None):
                if s is not None and step is not None and s.fetch in own and s.KIND != step.KIND:
                    raise _Bad(f"a {s.KIND} state for the source's own fetch step, which is "
                               f"{step.KIND}")
        except _Bad as e:
            raise SourceStateError(f"{where}: not a source state as coord writes it: {e}; "
                                   "restore the file, or reset the dataset to an earlier block") \
                from None
        return state


def fingerprint(step: FetchStep) -> str:
    """The ``fetch`` field: 16 hex digits of the SHA-256 of the canonical JSON of what the
    step takes (see the module doc)."""
    from ..metadata.objects import FetchStepFilesGlob, FetchStepUrl, SourceOrdering
    from ..metadata.yaml_codec import to_dict

    if isinstance(step, FetchStepFilesGlob):
        order = step.order or SourceOrdering.BY_NAME
        takes: dict[str, Any] = {"kind": step.KIND, "path": step.path, "order": order.value[0]}
        if order is SourceOrdering.BY_EVENT_TIME and step.event_time is not None:
            takes["eventTime"] = to_dict(step.event_time)
    elif isinstance(step, FetchStepUrl):
        takes = {"kind": step.KIND, "url": step.url}
    else:
        takes = to_dict(step)
    return _digest(takes)


def fingerprints(step: FetchStep) -> frozenset[str]:
    """The ``fetch`` fields of states this step wrote: ``fingerprint``, and the whole-step one
    of earlier versions."""
    from ..metadata.yaml_codec import to_dict

    return frozenset({fingerprint(step), _digest(to_dict(step))})


def _digest(value: dict) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


T = TypeVar("T", UrlState, FilesGlobState, FeedState)


def progress_of(kind: type[T], step: FetchStep, state: FetchState | None) -> T | None:
    """``state`` if the fetch ``step`` (of ``kind``) wrote it, else None: progress an earlier
    step made no longer applies. A state of another kind for this very step is refused."""
    if state is None or state.fetch not in fingerprints(step):
        return None
    if not isinstance(state, kind):
        raise SourceStateError(f"fetch {step.KIND}: the source state is a {state.KIND} state")
    return state


# --- the codec -------------------------------------------------------------------------------


def _render(s: FetchState) -> dict[str, Any]:
    out: dict[str, Any] = {"fetch": s.fetch}
    if isinstance(s, UrlState):
        values: dict[str, Any] = {"sha256": s.sha256, "etag": s.etag,
                                  "last_modified": s.last_modified, "mtime_ns": s.mtime_ns,
                                  "size": s.size}
        out.update({k: v for k, v in values.items() if v is not None})
    elif isinstance(s, FilesGlobState):
        out["last_file"] = s.last_file
        if s.last_event_time is not None:
            out["last_event_time"] = format_timestamp(s.last_event_time)
    else:
        out.update(update=s.update, files=list(s.files), consumed=dict(s.consumed),
                   superseded=list(s.superseded))
    return out


class _Bad(Exception):
    """What is wrong, said to the user inside the one-line error."""


class _Object:
    """A JSON object being read: typed fields by name, and none left unknown."""

    def __init__(self, raw: object, what: str):
        if not isinstance(raw, dict):
            raise _Bad(f"{what} is not a JSON object")
        self.raw: dict[str, object] = raw
        self.what = what

    def take(self, key: str, kind: type, *, required: bool = True) -> Any:
        value = self.raw.get(key)
        if value is None:
            if required or key in self.raw:
                raise _Bad(f"{self.what} has no {key!r}")
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _Bad(f"{self.what}: {key!r} is not {_NAMES[kind]}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        values = self.take(key, list)
        if not all(isinstance(v, str) for v in values):
            raise _Bad(f"{self.what}: {key!r} is not a list of strings")
        return tuple(values)

    def only(self, known: frozenset[str]) -> None:
        unknown = sorted(self.raw.keys() - known)
        if unknown:
            raise _Bad(f"{self.what} has unknown fields {', '.join(map(repr, unknown))}")


_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _parse(raw: object, what: str) -> FetchState:
    """A fetch kind's state, told by its fields."""
    o = _Object(raw, what)
    kinds = [k for k in _KINDS if _FIELDS[k] & o.raw.keys()]
    if len(kinds) != 1:
        found = f"those of {' and '.join(k.KIND for k in kinds)}" if kinds else "none"
        raise _Bad(f"{what} must have the fields of one fetch kind (url, filesGlob or "
                   f"fileFeed), it has {found}")
    kind = kinds[0]
    o.only(_FIELDS[kind] | {"fetch"})
    fetch = o.take("fetch", str)
    if kind is UrlState:
        return UrlState(fetch, sha256=o.take("sha256", str, required=False),
                        etag=o.take("etag", str, required=False),
                        last_modified=o.take("last_modified", str, required=False),
                        mtime_ns=o.take("mtime_ns", int, required=False),
                        size=o.take("size", int, required=False))
    if kind is FilesGlobState:
        t = o.take("last_event_time", str, required=False)
        try:
            event_time = parse_timestamp(t) if t is not None else None
        except TimeParseError as e:
            raise _Bad(f"{what}: 'last_event_time': {e}") from None
        return FilesGlobState(fetch, o.take("last_file", str), event_time)
    consumed = o.take("consumed", dict)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in consumed.values()):
        raise _Bad(f"{what}: 'consumed' does not map updates to numbers of files")
    return FeedState(fetch, o.take("update", str), o.strings("files"),
                     tuple(consumed.items()), o.strings("superseded"))


def _resume(raw: dict) -> Resume:
    r = _Object(raw, "'resume'")
    r.only(frozenset({"file", "records", "of"}))
    of = _Object(r.take("of", dict), "'resume.of'")
    of.only(frozenset({"state", "size", "mtime_ns"}))
    identity = FileIdentity(_parse(of.take("state", dict), "'resume.of.state'"),
                            of.take("size", int), of.take("mtime_ns", int, required=False))
    return Resume(r.take("file", str), r.take("records", int), identity)
