"""Timestamps and system-time intervals in the spec's text syntax.

Times are timezone-aware UTC ``datetime`` objects everywhere in the coordinator. An ODF
Timestamp carries nanoseconds and a block's hash covers them, but ``datetime`` stops at
microseconds, so a time with nanoseconds below the microsecond is a ``Timestamp``: a
``datetime`` subclass that also carries ``nanosecond`` (0-999, the digits after
``microsecond``, as in pandas). A subclass rather than a separate value type because the rest
of the code constructs, compares and formats block times as ``datetime``; every one of those
uses keeps working, and only the codecs need to know about the extra digits:

- comparisons, equality and hashing take the nanoseconds into account (a ``Timestamp`` with
  ``nanosecond == 0`` equals, and hashes as, the plain ``datetime``), so chain checks order
  times exactly;
- adding or subtracting a ``timedelta`` keeps the nanoseconds; the difference of two times is
  a ``timedelta`` (microseconds);
- ``parse_timestamp`` and the FlatBuffers decoder give a ``Timestamp`` only when there are
  sub-microsecond digits, so blocks without them behave exactly as before.

Invariant: text → time → text, FlatBuffers → time → FlatBuffers and epoch nanoseconds → time
→ epoch nanoseconds are exact at nanosecond precision.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..errors import Invalid

UTC = UTC

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})$",
    re.ASCII,  # digits 0-9 only, as RFC 3339 says (\d alone also takes '٣')
)


class TimeParseError(Invalid, ValueError):
    pass


def _comparison(test: Callable[[int], bool]) -> Callable[[Timestamp, object], bool]:
    """A rich comparison method of ``Timestamp`` from a test on the order (-1, 0, 1)."""
    def compare(self: Timestamp, other: object) -> bool:
        order = self._order(other)
        return NotImplemented if order is None else test(order)
    return compare


class Timestamp(datetime):
    """A ``datetime`` with the nanoseconds below its microseconds (see the module docstring)."""

    __slots__ = ("_nanosecond",)
    _nanosecond: int

    def __new__(cls, *args, nanosecond: int = 0, **kwargs):
        if not 0 <= nanosecond <= 999:
            raise ValueError(f"nanosecond must be in 0..999, got {nanosecond}")
        self = super().__new__(cls, *args, **kwargs)
        self._nanosecond = nanosecond
        return self

    @property
    def nanosecond(self) -> int:
        # datetime's C methods (replace, astimezone) build instances without calling __new__
        return getattr(self, "_nanosecond", 0)

    def _order(self, other) -> int | None:
        """-1, 0 or 1 against another datetime; None for anything else."""
        if not isinstance(other, datetime):
            return None
        if datetime.__lt__(self, other):
            return -1
        if datetime.__gt__(self, other):
            return 1
        mine, theirs = self.nanosecond, nanosecond_of(other)
        return (mine > theirs) - (mine < theirs)

    __eq__ = _comparison(lambda order: order == 0)
    __ne__ = _comparison(lambda order: order != 0)
    __lt__ = _comparison(lambda order: order < 0)
    __le__ = _comparison(lambda order: order <= 0)
    __gt__ = _comparison(lambda order: order > 0)
    __ge__ = _comparison(lambda order: order >= 0)

    def __hash__(self):
        base = datetime.__hash__(self)
        return hash((base, self.nanosecond)) if self.nanosecond else base

    def __add__(self, other):
        result = datetime.__add__(self, other)
        return with_nanosecond(result, self.nanosecond) if isinstance(result, datetime) else result

    __radd__ = __add__

    def __sub__(self, other):
        result = datetime.__sub__(self, other)
        return with_nanosecond(result, self.nanosecond) if isinstance(result, datetime) else result

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:  # str() uses it too
        if timespec != "auto" or not self.nanosecond:
            return datetime.isoformat(self, sep, timespec)
        text = datetime.isoformat(self, sep, "microseconds")
        end = text.index(".") + 7
        return f"{text[:end]}{self.nanosecond:03d}{text[end:]}"

    def __reduce_ex__(self, protocol):  # pickle and copy keep the nanoseconds
        return with_nanosecond, (_plain(self), self.nanosecond)

    def __repr__(self):
        return f"Timestamp({format_timestamp(self)!r})"


def _plain(t: datetime) -> datetime:
    return datetime(t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond, t.tzinfo)


def with_nanosecond(t: datetime, nanosecond: int) -> datetime:
    """``t`` with these nanoseconds below its microseconds (a plain datetime when 0)."""
    if not nanosecond:
        return _plain(t) if isinstance(t, Timestamp) else t
    return Timestamp(t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond, t.tzinfo,
                     nanosecond=nanosecond)


def nanosecond_of(t: datetime) -> int:
    """The nanoseconds below ``t``'s microseconds (0 for a plain datetime)."""
    return t.nanosecond if isinstance(t, Timestamp) else 0


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_nanos(t: datetime) -> int:
    """Nanoseconds since 1970-01-01T00:00:00Z, exactly."""
    return (t - _EPOCH) // timedelta(microseconds=1) * 1000 + nanosecond_of(t)


def from_epoch_nanos(n: int) -> datetime:
    micros, nanos = divmod(n, 1000)
    return with_nanosecond(_EPOCH + timedelta(microseconds=micros), nanos)


def parse_timestamp(text: str | datetime) -> datetime:
    """Parse an RFC 3339 timestamp (``2020-01-01T12:00:00Z``) into an aware UTC datetime,
    exactly to the nanosecond (a ``Timestamp`` when there are sub-microsecond digits)."""
    if isinstance(text, datetime):  # PyYAML already turns unquoted timestamps into datetimes
        return text.replace(tzinfo=UTC) if text.tzinfo is None else text.astimezone(UTC)
    m = _RFC3339.match(text.strip())
    if not m:
        raise TimeParseError(f"not an RFC 3339 timestamp: {text!r}")
    y, mo, d, h, mi, s, frac, tz = m.groups()
    frac = (frac or "").ljust(9, "0")
    try:
        dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int(frac[:6]))
    except ValueError as e:
        raise TimeParseError(f"not a valid timestamp: {text!r} ({e})") from None
    if tz in ("Z", "z"):
        offset = timedelta(0)
    else:
        sign = 1 if tz[0] == "+" else -1
        offset = sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    try:
        utc = (dt - offset).replace(tzinfo=UTC)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is after year 9999 in UTC
        raise TimeParseError(f"not a valid timestamp: {text!r} (out of range in UTC)") from None
    return with_nanosecond(utc, int(frac[6:]))


def format_timestamp(dt: datetime) -> str:
    """RFC 3339 in UTC with ``Z``; the fraction (up to nanoseconds) only when non-zero."""
    utc = dt.astimezone(UTC)
    base = utc.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = utc.microsecond * 1000 + nanosecond_of(dt)
    if fraction:
        base += "." + f"{fraction:09d}".rstrip("0")
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
        assert iv.left is not None, "a singleton interval has its time on the left"
        t = format_timestamp(iv.left)
        return f"[{t}, {t}]"
    lb, rb = _TYPE_BRACKETS[k]
    lo = "-inf" if iv.left is None else format_timestamp(iv.left)
    hi = "inf" if iv.right is None else format_timestamp(iv.right)
    return f"{lb}{lo}, {hi}{rb}"
