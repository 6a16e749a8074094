"""Timestamps and system-time intervals in the spec's text syntax.

Times are timezone-aware UTC ``datetime`` objects everywhere in the coordinator. ODF stores
nanoseconds; Python keeps microseconds, so a block carrying sub-microsecond time is refused
with a clear error rather than silently rounded (rounding would change its hash on re-encode).
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..errors import CoordError

UTC = UTC

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})$"
)


class TimeParseError(CoordError, ValueError):
    pass


def parse_timestamp(text: str | datetime) -> datetime:
    """Parse an RFC 3339 timestamp (``2020-01-01T12:00:00Z``) into an aware UTC datetime."""
    if isinstance(text, datetime):  # PyYAML already turns unquoted timestamps into datetimes
        return text.replace(tzinfo=UTC) if text.tzinfo is None else text.astimezone(UTC)
    m = _RFC3339.match(text.strip())
    if not m:
        raise TimeParseError(f"not an RFC 3339 timestamp: {text!r}")
    y, mo, d, h, mi, s, frac, tz = m.groups()
    frac = (frac or "").ljust(9, "0")
    if int(frac[6:]):
        raise TimeParseError(f"timestamps finer than microseconds are not supported: {text!r}")
    try:
        dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int(frac[:6]))
    except ValueError as e:
        raise TimeParseError(f"not a valid timestamp: {text!r} ({e})") from None
    if tz in ("Z", "z"):
        offset = timedelta(0)
    else:
        sign = 1 if tz[0] == "+" else -1
        offset = sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    return (dt - offset).replace(tzinfo=UTC)


def format_timestamp(dt: datetime) -> str:
    """RFC 3339 in UTC with ``Z``; the fraction only when non-zero (the spec's text form)."""
    dt = dt.astimezone(UTC)
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        base += "." + f"{dt.microsecond:06d}".rstrip("0")
    return base + "Z"


def now_utc() -> datetime:
    return datetime.now(UTC)


class IntervalType(enum.IntEnum):
    """FlatBuffers ``TimeIntervalType`` in `.fbs` order."""

    CLOSED = 0
    OPEN = 1
    LEFT_HALF_OPEN = 2
    RIGHT_HALF_OPEN = 3
    UNBOUNDED_CLOSED_RIGHT = 4
    UNBOUNDED_OPEN_RIGHT = 5
    UNBOUNDED_CLOSED_LEFT = 6
    UNBOUNDED_OPEN_LEFT = 7
    SINGLETON = 8
    UNBOUNDED = 9
    EMPTY = 10


@dataclass(frozen=True)
class TimeInterval:
    type: IntervalType
    left: datetime | None = None
    right: datetime | None = None

    @staticmethod
    def singleton(t: datetime) -> TimeInterval:
        return TimeInterval(IntervalType.SINGLETON, t, None)

    @staticmethod
    def parse(text: str) -> TimeInterval:
        return parse_interval(text)

    def __str__(self) -> str:
        return format_interval(self)


# (left bracket, right bracket, left unbounded, right unbounded) -> type
_BRACKETS = {
    ("[", "]", False, False): IntervalType.CLOSED,
    ("(", ")", False, False): IntervalType.OPEN,
    ("(", "]", False, False): IntervalType.LEFT_HALF_OPEN,
    ("[", ")", False, False): IntervalType.RIGHT_HALF_OPEN,
    ("(", "]", True, False): IntervalType.UNBOUNDED_CLOSED_RIGHT,
    ("(", ")", True, False): IntervalType.UNBOUNDED_OPEN_RIGHT,
    ("[", ")", False, True): IntervalType.UNBOUNDED_CLOSED_LEFT,
    ("(", ")", False, True): IntervalType.UNBOUNDED_OPEN_LEFT,
}
_TYPE_BRACKETS = {v: (k[0], k[1]) for k, v in _BRACKETS.items()}


def parse_interval(text: str) -> TimeInterval:
    s = text.strip()
    if s == "()":
        return TimeInterval(IntervalType.EMPTY)
    if len(s) < 2 or s[0] not in "[(" or s[-1] not in "])" or "," not in s:
        raise TimeParseError(f"not a time interval: {text!r} (expected e.g. '[a, b]' or '(-inf, b]')")
    lo, hi = (p.strip() for p in s[1:-1].split(",", 1))
    lu, ru = lo == "-inf", hi in ("inf", "+inf")
    if lu and ru:
        if (s[0], s[-1]) != ("(", ")"):
            raise TimeParseError(f"not a time interval: {text!r} (infinite ends are open: '(-inf, inf)')")
        return TimeInterval(IntervalType.UNBOUNDED)
    left = None if lu else parse_timestamp(lo)
    right = None if ru else parse_timestamp(hi)
    if left is not None and right is not None and left > right:
        raise TimeParseError(f"not a time interval: {text!r} (its start is after its end)")
    if s[0] == "[" and s[-1] == "]" and left == right:
        return TimeInterval(IntervalType.SINGLETON, left)
    kind = _BRACKETS.get((s[0], s[-1], lu, ru))
    if kind is None:
        raise TimeParseError(f"not a time interval: {text!r}")
    return TimeInterval(kind, left, right)


def format_interval(iv: TimeInterval) -> str:
    k = iv.type
    if k is IntervalType.EMPTY:
        return "()"
    if k is IntervalType.UNBOUNDED:
        return "(-inf, inf)"
    if k is IntervalType.SINGLETON:
        t = format_timestamp(iv.left)
        return f"[{t}, {t}]"
    lb, rb = _TYPE_BRACKETS[k]
    lo = "-inf" if iv.left is None else format_timestamp(iv.left)
    hi = "inf" if iv.right is None else format_timestamp(iv.right)
    return f"{lb}{lo}, {hi}{rb}"
