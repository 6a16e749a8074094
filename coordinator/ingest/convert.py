"""Text → typed columns, shared by the readers (CSV columns read as text, JSON, GeoJSON).

Arrow's own parsers cover most types; what they cannot do is done here, column-at-a-time:
``TIMESTAMP`` columns that mix ``2013-01-01``, ``2013-01-01 10:00`` and ``...T10:00:00Z``
(zone-less values are taken as UTC), custom date/time formats, custom NaN/Inf tokens,
whitespace trimming, and ``DECIMAL(p,s)`` values with more than ``s`` fractional digits.

A timestamp with more fractional digits than its column's unit holds is refused, unless the
file is read for a current-ODF dataset (``TextOptions.floor_times``): then the digits the unit
does not hold are dropped, which floors the instant to the unit (a calendar time's fraction
counts up from its second, before 1970 too), as the reference's readers (arrow-rs, through
chrono) read such text.

Decimals are read as Spark's CSV reader reads them: rounded half-up (ties away from zero,
Java's ``RoundingMode.HALF_UP``) to the declared scale. Only a value that does not fit the
precision is refused. The text is first read exactly into a decimal far wider than the target
(``reading_decimal``), so rounding happens once, on the exact value.

A value that does not convert is located by bisection (only on the error path) so the message
names its row.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CoordError

# a time part followed by a zone: "...T10:00:00Z", "... 10:00+01:00" (a bare date has none)
_ZONED = r"\d[T ]\d\d:\d\d.*([Zz]|[+-]\d\d:?\d\d)$"
_PROBE_ROWS = 64  # values looked at to guess whether a timestamp column carries zones

class ConversionError(CoordError, ValueError):
    def __init__(self, column: str, row: int, value, target: str, reason: str = ""):
        self.column, self.row, self.value, self.target, self.reason = column, row, value, target, reason
        why = f" ({reason})" if reason else ""
        super().__init__(f"row {row + 1}, column {column!r}: cannot read {value!r} as {target}{why}")

    def shifted(self, rows: int) -> ConversionError:
        """The same error in a file whose piece started after ``rows`` records."""
        return ConversionError(self.column, self.row + rows, self.value, self.target, self.reason)


@dataclass(frozen=True)
class TextOptions:
    """How text values are read (the read step's options that apply after parsing)."""

    date_format: str | None = None  # strftime
    timestamp_format: str | None = None  # strftime
    nan_value: str | None = None
    positive_inf: str | None = None
    negative_inf: str | None = None
    trim_leading: bool = False
    trim_trailing: bool = False
    empty_value: str | None = None  # what a quoted empty string "" becomes
    # digits of a timestamp finer than its column's unit are dropped (not refused)
    floor_times: bool = False

    def needs_text(self, target: pa.DataType) -> bool:
        """Whether a column of this type must be read as text and converted here."""
        if self.trim_leading or self.trim_trailing:
            return True
        if pa.types.is_timestamp(target) or pa.types.is_decimal(target):
            return True
        if pa.types.is_date(target):
            return self.date_format is not None
        if pa.types.is_floating(target):
            return any((self.nan_value, self.positive_inf, self.negative_inf))
        if pa.types.is_string(target):
            return self.empty_value is not None
        return False


def convert_column(name: str, text: pa.ChunkedArray, target: pa.DataType,
                   opts: TextOptions) -> pa.ChunkedArray:
    """Convert a text column to ``target``; raise ConversionError naming the first bad row."""
    text = _trim(text, opts)
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        if opts.empty_value is not None:
            text = pc.if_else(pc.equal(text, ""), opts.empty_value, text)
        return text.cast(target)
    convert = _converter(target, opts)
    try:
        return convert(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        row = first_failure(text, convert)
        if row is None:
            raise ConversionError(name, 0, None, str(target), str(e)) from None
        value = text[row].as_py()
        raise ConversionError(name, row, value, str(target), _why(value, target)) from None


def _why(value, target: pa.DataType) -> str:
    """The reason when the value is a number too large for a decimal's precision."""
    if not pa.types.is_decimal(target):
        return ""
    integer_digits = target.precision - target.scale
    with localcontext(prec=80):
        try:
            number = Decimal(value)
        except (InvalidOperation, TypeError):
            return ""
        # the smallest magnitude that rounds to one integer digit too many
        limit = Decimal(10) ** integer_digits - Decimal(5).scaleb(-target.scale - 1)
        too_large = number.is_finite() and abs(number) >= limit
    return f"more than {integer_digits} digits before the decimal point" if too_large else ""


def first_failure(values, convert: Callable) -> int | None:
    """Index of the first value ``convert`` rejects, by bisection (O(n log n), error path only)."""
    lo, hi = 0, len(values)
    try:
        convert(values)
        return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    while hi - lo > 1:  # invariant: values[lo:hi] contains a failure
        mid = (lo + hi) // 2
        try:
            convert(values.slice(lo, mid - lo))
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            hi = mid
    return lo


def _trim(text, opts: TextOptions):
    if opts.trim_leading:
        text = pc.utf8_ltrim_whitespace(text)
    if opts.trim_trailing:
        text = pc.utf8_rtrim_whitespace(text)
    return text


def reading_decimal(target: pa.DataType) -> pa.DataType:
    """The decimal a ``target`` value is read into before rounding: every integer digit the
    target allows plus one (a rounding carry), and the rest of 76 digits for the fraction
    (at least the target's scale, for precisions near 76)."""
    fraction = 76 - (target.precision - target.scale) - 1
    return pa.decimal256(76, max(fraction, target.scale))


def round_half_up(values, target: pa.DataType):
    """Exact decimals → ``target``, rounded half away from zero to its scale; ArrowInvalid
    when a value does not fit its precision."""
    rounded = pc.round(values, ndigits=target.scale, round_mode="half_towards_infinity")
    return rounded.cast(target)


def _converter(target: pa.DataType, opts: TextOptions) -> Callable:
    if pa.types.is_decimal(target):
        wide = reading_decimal(target)
        return lambda a: round_half_up(a.cast(wide), target)
    if pa.types.is_timestamp(target):
        fmt = opts.timestamp_format
        floor = opts.floor_times and fmt is None

        def timestamps(a):
            # floored at once when the first values need it (a failed parse costs several times
            # a good one), else only if the parse fails
            if floor and _finer_than(a.slice(0, _PROBE_ROWS), target.unit):
                return floored_timestamps(a, target)
            try:
                return parse_timestamps(a, target, fmt)
            except pa.ArrowInvalid:
                if not floor:
                    raise
            return floored_timestamps(a, target)
        return timestamps
    if pa.types.is_date(target) and opts.date_format:
        fmt = opts.date_format
        return lambda a: pc.strptime(a, format=fmt, unit="s").cast(pa.timestamp("s")).cast(target)
    if pa.types.is_floating(target):
        tokens = {opts.nan_value: "NaN", opts.positive_inf: "inf", opts.negative_inf: "-inf"}
        tokens.pop(None, None)

        def floats(a):
            for token, spelled in tokens.items():
                a = pc.if_else(pc.equal(a, token), spelled, a)
            return a.cast(target)
        return floats
    return lambda a: a.cast(target)


_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_PER_UNIT_NS = {"s": 10**9, "ms": 10**6, "us": 10**3}


def floored_timestamps(text, target: pa.DataType):
    """Text → ``target`` (as ``parse_timestamps``), the digits finer than its unit dropped:
    each instant floored to the unit. Read in nanoseconds and floored as numbers; text beyond
    their range (years before 1677 or after 2262) or with more than 9 digits, as text."""
    if target.unit != "ns":
        try:
            nanos = parse_timestamps(text, pa.timestamp("ns", tz="UTC")).cast(pa.int64())
        except pa.ArrowInvalid:
            pass
        else:
            per = _PER_UNIT_NS[target.unit]
            whole = pc.divide(nanos, per)  # toward zero: one less where that rounded up
            whole = pc.if_else(pc.less(nanos, pc.multiply(whole, per)), pc.subtract(whole, 1), whole)
            return whole.cast(pa.timestamp(target.unit, tz="UTC")).cast(target)
    return parse_timestamps(floored_to_unit(text, target.unit), target)


def _finer_than(text, unit: str) -> bool:
    """Whether any of the timestamps ``text`` has digits finer than ``unit``."""
    return bool(pc.any(pc.match_substring_regex(text, rf"\d:\d\d:\d\d\.\d{{{_DIGITS[unit] + 1}}}")).as_py())


def floored_to_unit(text, unit: str):
    """Timestamp text without the fractional digits finer than ``unit`` (``...:56.123456789``
    is ``...:56.123`` for milliseconds, ``...:56`` for seconds): the instant floored to it."""
    keep = _DIGITS[unit]
    pattern = r"(\d:\d\d:\d\d)\.\d+" if keep == 0 else rf"(\d:\d\d:\d\d\.\d{{{keep}}})\d+"
    return pc.replace_substring_regex(text, pattern=pattern, replacement=r"\1")


def parse_timestamps(text, target: pa.DataType, fmt: str | None = None):
    """Text → ``target`` (a timestamp type; a zone-less target means UTC wall time).

    Values with a zone offset are converted to UTC; values without one (including bare dates)
    are taken as UTC, so one column may mix both.
    """
    utc = pa.timestamp(target.unit, tz="UTC")
    if fmt is not None:
        parsed = pc.strptime(text, format=fmt, unit=target.unit)
        return parsed.cast(utc if parsed.type.tz is None else parsed.type).cast(target)
    # Fast path, one cast when the first values are all zoned or all zone-less and the rest
    # are too. Which one is guessed from those values: a cast that fails costs several times
    # one that succeeds (Arrow tries every value), 1.1 s per million values here.
    probe = pc.match_substring_regex(text.slice(0, _PROBE_ROWS), _ZONED)
    some, every = pc.any(probe).as_py(), pc.all(probe).as_py()
    if every or not some:
        try:
            return text.cast(utc if some else pa.timestamp(target.unit)).cast(utc).cast(target)
        except pa.ArrowInvalid:
            pass
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONED), False)
    with_zone = pc.if_else(zoned, text, None).cast(utc)
    without_zone = pc.if_else(zoned, None, text).cast(pa.timestamp(target.unit)).cast(utc)
    return pc.coalesce(with_zone, without_zone).cast(target)
