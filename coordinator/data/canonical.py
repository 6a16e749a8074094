"""The canonical text of one column's values (profile: ``schemas/DATA-HASHING.md``, "Values").

``render(array)`` gives one string per value, ``\\N`` for nulls, with Arrow compute and numpy
only: whole-number floats as integers plus ``.0``, columns with few distinct values rendered
once per value and looked up, timestamps from integer arithmetic, string escaping only on the
values a byte scan flags. ``hashing`` joins the columns into rows, orders and hashes them.
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CoordError
from . import validity

_NULL = "\\N"
# Strings escape these bytes as a backslash and this letter (the backslash itself doubles).
_ESCAPED = np.zeros(256, dtype=np.uint8)
_ESCAPED[[0x5C, 0x09, 0x0A, 0x0D]] = [ord(c) for c in "\\tnr"]
# 0001-01-01 and 9999-12-31 in days since the epoch: RFC 3339 needs four-digit years.
_MIN_DAY, _MAX_DAY = -719162, 2932896
_DAY_US = 86_400_000_000
_DIGITS3 = np.frombuffer(b"".join(b"%03d" % i for i in range(1000)), dtype=np.uint8).reshape(
    1000, 3
)
_HEX = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), dtype=np.uint8).reshape(256, 2)
# Columns with few distinct values are rendered once per value and expanded with a take
# (integers and dates: every value of a small range; floats and timestamps: a dictionary).
_FEW_ROWS = 1024


class UnsupportedValueError(CoordError, ValueError):
    """A column's type or a value is outside the hashing profile."""


def render(arr: pa.Array) -> pa.Array:
    """A column's canonical text, ``\\N`` for nulls."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):  # e.g. arrow.uuid: rendered as its storage
        return render(arr.storage)
    if pa.types.is_dictionary(t):
        return render(arr.dictionary_decode())
    if pa.types.is_integer(t):  # plain digits
        return _small_range(arr, arr, _cast_text) or _complete(_cast_text(arr))
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        return _render_float(arr)
    if pa.types.is_timestamp(t):
        return _render_timestamp(arr)
    if pa.types.is_date(t):
        days = pc.cast(arr, pa.date32())
        _check_range(days.view(pa.int32()), _MIN_DAY, _MAX_DAY)
        return _small_range(days, days.view(pa.int32()), _cast_text) or _complete(_cast_text(days))
    return _complete(_render_other(arr))


def _render_other(arr: pa.Array) -> pa.Array:
    """Text of the remaining types, null where the value is null."""
    t = arr.type
    if pa.types.is_null(t) or pa.types.is_boolean(t):
        return pc.cast(arr, pa.string())  # true/false
    if pa.types.is_decimal(t):
        return _render_decimal(arr)
    if pa.types.is_time(t):
        return pc.cast(pc.cast(arr, pa.time64("us")), pa.string())  # HH:MM:SS.ffffff
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _escape(pc.cast(arr, pa.string()))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return _hex(pc.cast(arr, pa.binary()))
    if pa.types.is_fixed_size_binary(t):
        return _hex(pc.cast(arr, pa.binary()))
    raise UnsupportedValueError(f"type {t} has no canonical text in the hashing profile")


def _complete(text: pa.Array) -> pa.Array:
    """Nulls as ``\\N``."""
    return pc.fill_null(text, _NULL) if text.null_count else text


def _render_timestamp(arr: pa.Array) -> pa.Array:
    """RFC 3339 in UTC with six fraction digits: ``2020-01-01T00:00:00.000000Z``."""
    # Reading the stored instants as a naive timestamp gives UTC wall time whatever the zone
    # (and casting a zoned one to text is slow); the safe cast to microseconds refuses
    # nanoseconds that would be truncated.
    utc = pc.cast(arr.view(pa.timestamp(arr.type.unit)), pa.timestamp("us"))
    _check_range(utc.view(pa.int64()), _MIN_DAY * _DAY_US, (_MAX_DAY + 1) * _DAY_US - 1)
    return _few_values(utc, _timestamp_text) or _complete(_timestamp_text(utc))


def _timestamp_text(utc: pa.Array) -> pa.Array:
    """Text of microsecond timestamps already checked to lie within years 0001-9999.

    Every value is 27 bytes: the date comes from a table of the column's days, the time of
    day from tables of ``HH:MM:SS`` per second of the day and of three-digit groups.
    """
    us, valid = numpy_values(utc), _valid(utc)
    if valid is not None:
        us = np.where(valid, us, us[valid][0] if valid.any() else 0)
    n = len(us)
    days = us // _DAY_US
    low, high = (int(days.min()), int(days.max())) if n else (0, 0)
    if high - low > max(n, 1024) or 27 * n >= 1 << 31:
        text = pc.cast(utc, pa.string())  # 2020-01-01 00:00:00.000000
        return append_text(pc.binary_replace_slice(text, 10, 11, "T"), "Z")
    every_day = pc.cast(pa.array(np.arange(low, high + 1, dtype=np.int32)).view(pa.date32()),
                        pa.string())
    date_text = offsets_and_data(every_day)[1].reshape(-1, 10)
    date_words = np.zeros((len(date_text), 2, 8), dtype=np.uint8)  # 8 bytes, then 2 and T
    date_words[:, 0] = date_text[:, :8]
    date_words[:, 1, :2] = date_text[:, 8:]
    date_words[:, 1, 2] = ord("T")
    date_words = np.ascontiguousarray(date_words.view(np.uint64)[..., 0].T)
    clock_a, clock_b, millis, micros_a, micros_b = _time_words()
    time_of_day = us - days * _DAY_US
    seconds = time_of_day // 1_000_000
    micros = time_of_day - seconds * 1_000_000
    # Each row is built as four little-endian 8-byte words (32 bytes), then cut to 27.
    words = np.empty((n, 4), dtype=np.uint64)
    day_index = days - low
    words[:, 0] = date_words[0][day_index]
    words[:, 1] = date_words[1][day_index] | clock_a[seconds]
    low_digits = micros % 1000
    words[:, 2] = clock_b[seconds] | millis[micros // 1000] | micros_a[low_digits]
    words[:, 3] = micros_b[low_digits]
    out = np.ascontiguousarray(words.view(np.uint8).reshape(n, 32)[:, :27])
    return _string_array(np.arange(0, 27 * n + 1, 27, dtype=np.int32), out, valid)


@functools.cache
def _time_words() -> tuple[np.ndarray, ...]:
    """Bytes 8-31 of a timestamp's text as 8-byte words, for every second and digit group.

    Bytes 11-18 are ``HH:MM:SS``, 19 the point, 20-25 the microseconds, 26 ``Z``.
    """
    s = np.arange(86_400)
    fields = np.stack([s // 3600, s // 60 % 60, s % 60], axis=1)
    hms = np.full((86_400, 8), ord(":"), dtype=np.uint8)
    hms[:, [0, 3, 6]] = fields // 10 + ord("0")
    hms[:, [1, 4, 7]] = fields % 10 + ord("0")
    clock = np.zeros((86_400, 2, 8), dtype=np.uint8)
    clock[:, 0, 3:] = hms[:, :5]  # bytes 11-15
    clock[:, 1, :3] = hms[:, 5:]  # bytes 16-18
    clock[:, 1, 3] = ord(".")
    millis = np.zeros((1000, 8), dtype=np.uint8)
    millis[:, 4:7] = _DIGITS3  # bytes 20-22
    micros3 = np.zeros((1000, 2, 8), dtype=np.uint8)
    micros3[:, 0, 7] = _DIGITS3[:, 0]  # byte 23
    micros3[:, 1, :2] = _DIGITS3[:, 1:]  # bytes 24-25
    micros3[:, 1, 2] = ord("Z")
    clock64, micros64 = clock.view(np.uint64)[..., 0], micros3.view(np.uint64)[..., 0]
    return (clock64[:, 0].copy(), clock64[:, 1].copy(), millis.view(np.uint64)[:, 0],
            micros64[:, 0].copy(), micros64[:, 1].copy())


def _string_array(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """A string array over numpy offsets and bytes (valid: which values are not null)."""
    validity = None
    if valid is not None:
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.string(), len(offsets) - 1, [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _cast_text(arr: pa.Array) -> pa.Array:
    return pc.cast(arr, pa.string())


def _small_range(arr: pa.Array, ints: pa.Array, render) -> pa.Array | None:
    """Render every value of a small integer range once and take each row's text (or None).

    `ints` is `arr` as integers (the same values for integer columns, the day for dates).
    """
    n = len(arr)
    if n < _FEW_ROWS:
        return None
    low, high = (v.as_py() for v in pc.min_max(ints).values())
    if low is None or high - low >= n // 2 or high >= 1 << 62 or low < -(1 << 62):
        return None
    every = pa.array(np.arange(low, high + 1, dtype=np.int64)).cast(ints.type)
    if ints.type != arr.type:
        every = every.view(arr.type)
    return _lookup(render(every), pc.subtract(ints.cast(pa.int64()), low))


def _few_values(arr: pa.Array, render) -> pa.Array | None:
    """Render a fixed-width column via a dictionary of its distinct values, if they are few.

    Values are told apart by their bits (so -0.0 and 0.0 stay apart). None when at least
    half the values are distinct (cheap to tell when the values are in order, as event times
    are), and then rendering them directly is cheaper.
    """
    n = len(arr)
    if n < _FEW_ROWS:
        return None
    bits = arr.view(pa.int64() if arr.type.bit_width == 64 else pa.int32())
    if not arr.null_count:
        x = numpy_values(bits)
        if (x[1:] >= x[:-1]).all():  # in order: the distinct values are where it changes
            changes = x[1:] != x[:-1]
            if np.count_nonzero(changes) >= n // 2:
                return None
            firsts = np.concatenate([[0], np.flatnonzero(changes) + 1])
            indices = np.zeros(n, dtype=np.int32)
            np.cumsum(changes, out=indices[1:])
            return _lookup(render(pa.array(x[firsts]).view(arr.type)), pa.array(indices))
    encoded = pc.dictionary_encode(bits)
    if len(encoded.dictionary) >= n // 2:
        return None
    return _lookup(render(encoded.dictionary.view(arr.type)), encoded.indices)


def _lookup(texts: pa.Array, indices: pa.Array) -> pa.Array:
    """Each index's text; a null index gives ``\\N``."""
    table = _complete(pa.concat_arrays([texts, pa.array([None], pa.string())]))
    if indices.null_count:
        indices = pc.fill_null(indices, len(texts))
    return table.take(indices)


def _check_range(values: pa.Array, lo: int, hi: int) -> None:
    """Refuse dates and times outside years 0001-9999 (RFC 3339 has four-digit years)."""
    low, high = (v.as_py() for v in pc.min_max(values).values())
    if low is not None and (low < lo or high > hi):
        raise UnsupportedValueError("dates and timestamps must lie within years 0001-9999")


def append_text(text: pa.Array, suffix: str) -> pa.Array:
    # A slice replaced past the end appends; cheaper than a join with a scalar.
    return pc.binary_replace_slice(text, 1 << 30, 1 << 30, suffix)


def _escape(text: pa.Array) -> pa.Array:
    """Escape backslash, tab, newline and carriage return: a backslash goes before each."""
    offsets, data = offsets_and_data(text)
    data = data[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    # These bytes never occur inside a multi-byte UTF-8 sequence, so a byte scan is exact.
    special = (data == 0x5C) | (data == 0x09) | (data == 0x0A) | (data == 0x0D)
    if not special.any():
        return text
    positions = np.flatnonzero(special)
    escaped = data.copy()
    escaped[positions] = _ESCAPED[data[positions]]  # \ t n r
    escaped = np.insert(escaped, positions, ord("\\"))
    # Each value moves right by the number of special bytes before it.
    new_offsets = offsets + np.searchsorted(positions, offsets)
    if new_offsets[-1] >= 1 << 31:
        return _escape(text.cast(pa.large_string())).cast(pa.string())
    return _string_array(new_offsets.astype(np.int32), escaped, _valid(text))


def _render_decimal(arr: pa.Array) -> pa.Array:
    """Plain digits with exactly `scale` fraction digits, never an exponent."""
    scale = arr.type.scale
    # Arrow switches to exponent notation for small values (1E-7); formatting the unscaled
    # integer (same buffers, scale 0) and placing the point ourselves avoids that.
    factory = {4: pa.decimal32, 8: pa.decimal64, 16: pa.decimal128, 32: pa.decimal256}
    unscaled_type = factory[arr.type.byte_width](arr.type.precision, 0)
    unscaled = pa.Array.from_buffers(unscaled_type, len(arr), arr.buffers(), offset=arr.offset)
    digits = pc.cast(unscaled, pa.string())
    if scale == 0:
        return digits
    if scale < 0:  # 123 with scale -2 is 12300; zero stays 0
        zeros = pc.binary_join_element_wise(digits, "0" * -scale, "")
        return pc.if_else(pc.equal(digits, "0"), digits, zeros)
    negative = pc.starts_with(digits, "-")
    magnitude = pc.utf8_lpad(pc.utf8_ltrim(digits, "-"), scale + 1, "0")
    return pc.binary_join_element_wise(
        pc.if_else(negative, "-", ""),
        pc.utf8_slice_codeunits(magnitude, 0, -scale),
        ".",
        pc.utf8_slice_codeunits(magnitude, -scale),
        "",
    )


def _render_float(arr: pa.Array) -> pa.Array:
    """Python ``repr`` notation of the shortest round-trip digits (float32: of the float32).

    Integral values below 2**53 (float32: 2**24) are exactly their integer digits plus ``.0``
    (any other decimal with fewer digits is more than half a unit in the last place away), so
    a column of them is rendered as integers. Otherwise columns of few distinct values are
    rendered once per value.
    """
    x, valid = numpy_values(arr), _valid(arr)
    limit = 2.0**53 if pa.types.is_float64(arr.type) else 2.0**24
    with np.errstate(invalid="ignore"):
        integral = (np.floor(x) == x) & (np.abs(x) < limit)
    if valid is not None:
        integral |= ~valid
    if integral.all():
        whole = x.astype(np.int64) if valid is None else np.where(valid, x, 0).astype(np.int64)
        whole = pa.array(whole, mask=None if valid is None else ~valid)
        negative_zero = np.signbit(x) & (x == 0)
        if valid is not None:
            negative_zero &= valid
        if not negative_zero.any():
            looked_up = _small_range(whole, whole, _integral_float_text)
            if looked_up is not None:
                return looked_up
        text = _integral_float_text(whole)
        if negative_zero.any():
            text = pc.if_else(pa.array(negative_zero), "-0.0", text)
        return _complete(text)
    return _few_values(arr, _float_text) or _complete(_float_text(arr))


def _integral_float_text(whole: pa.Array) -> pa.Array:
    return append_text(pc.cast(whole, pa.string()), ".0")


def _float_text(arr: pa.Array) -> pa.Array:
    """Python ``repr`` notation, starting from Arrow's cast.

    Arrow's cast already gives the shortest digits (of the value's own precision) but writes
    fixed notation for decimal exponents -6..9 and ``1e-7`` style exponents, where Python's
    repr is fixed for exponents -4..15, always has a fraction (``1.0``) and writes ``1e-07``.
    The two agree on non-integral values with exponents -4..9, the common case; only the
    other values are rewritten. (Both break an exact tie between two shortest candidates
    towards the even digit.)
    """
    text = pc.cast(arr, pa.string())
    x, valid = numpy_values(arr), _valid(arr)
    magnitude = np.abs(x)
    with np.errstate(invalid="ignore"):
        # NaN compares false: rewritten. Bounds rounded to the column's own type (see below).
        agree = (magnitude >= x.dtype.type(1e-4)) & (magnitude < x.dtype.type(1e10))
        agree &= np.floor(x) != x
    if valid is not None:
        agree |= ~valid
    if agree.all():
        return text
    rewrite = pa.array(~agree)
    fixed = _python_float_text(text.filter(rewrite), arr.filter(rewrite))
    return pc.replace_with_mask(text, rewrite, fixed)


def _python_float_text(text: pa.Array, arr: pa.Array) -> pa.Array:
    """Rewrite Arrow's float text in Python repr notation, one exponent range at a time."""

    def rewrite(text: pa.Array, mask: pa.Array, fn) -> pa.Array:
        if not pc.any(mask).as_py():
            return text
        return pc.replace_with_mask(text, mask, fn(text.filter(mask), arr.filter(mask)))

    # Integral values Arrow writes in fixed notation ("1", "-0", "100") need ".0".
    integral = pc.and_(_magnitude_in(arr, 0, 1e10), pc.equal(pc.floor(arr), arr))
    text = rewrite(text, integral, lambda t, _: append_text(t, ".0"))
    # Exponents -6 and -5: Arrow fixed ("0.000015"), Python scientific ("1.5e-05").
    # Exponents 10..15: Arrow scientific ("1.5e+10"), Python fixed ("15000000000.0").
    for exp in (-6, -5, 10, 11, 12, 13, 14, 15):
        in_decade = _magnitude_in(arr, float(f"1e{exp}"), float(f"1e{exp + 1}"))
        text = rewrite(text, in_decade, lambda t, x, exp=exp: _repr_notation(t, x, exp))
    def pad_exponent(text: pa.Array, _) -> pa.Array:
        return pc.replace_substring_regex(text, r"e-(\d)$", r"e-0\1")

    # Exponents -7..-9: Python pads the exponent to two digits.
    text = rewrite(text, _magnitude_in(arr, 1e-10, 1e-6), pad_exponent)
    text = pc.if_else(pc.is_nan(arr), "NaN", text)
    return pc.if_else(pc.is_inf(arr), pc.if_else(pc.less(arr, 0), "-Infinity", "Infinity"), text)


def _magnitude_in(arr: pa.Array, lo: float, hi: float) -> pa.Array:
    """lo <= |x| < hi, with the bounds rounded to the column's own float type.

    A float's shortest digits are below 1e-4 exactly when the float is below the float
    nearest 1e-4 (parsing is monotonic), so comparing in the column's type is exact.
    """
    magnitude = pc.abs(arr)
    return pc.and_(
        pc.greater_equal(magnitude, pa.scalar(lo, arr.type)),
        pc.less(magnitude, pa.scalar(hi, arr.type)),
    )


def _repr_notation(text: pa.Array, values: pa.Array, exp: int) -> pa.Array:
    """Rewrite Arrow's text of floats whose decimal exponent is `exp` in Python repr notation."""
    sign = pc.if_else(pc.less(values, 0), "-", "")
    # The significant digits: drop sign, point, exponent and (for 0.0000…) leading zeros.
    digits = pc.utf8_ltrim(pc.replace_substring_regex(text, r"[-.]|e.*$", ""), "0")
    if exp < 0:  # d[.ddd]e-0N
        rest = pc.utf8_slice_codeunits(digits, 1)
        fraction = pc.if_else(pc.equal(rest, ""), "", pc.binary_join_element_wise(".", rest, ""))
        lead = pc.utf8_slice_codeunits(digits, 0, 1)
        return pc.binary_join_element_wise(sign, lead, fraction, f"e-{-exp:02d}", "")
    padded = pc.utf8_rpad(digits, exp + 1, "0")  # ddd…d.ddd with exp+1 integer digits
    fraction = pc.utf8_slice_codeunits(padded, exp + 1)
    fraction = pc.if_else(pc.equal(fraction, ""), "0", fraction)
    return pc.binary_join_element_wise(
        sign, pc.utf8_slice_codeunits(padded, 0, exp + 1), ".", fraction, ""
    )


def _hex(arr: pa.Array) -> pa.Array:
    """Lowercase hex of each binary value, via a byte → two-digit lookup on the data buffer."""
    offsets, data = offsets_and_data(arr)
    hexed = _HEX[data[offsets[0] : offsets[-1]]].tobytes()
    new_offsets = ((offsets - offsets[0]) * 2).astype(np.int32)
    out = pa.Array.from_buffers(
        pa.string(), len(arr), [None, pa.py_buffer(new_offsets), pa.py_buffer(hexed)]
    )
    return pc.if_else(pc.is_valid(arr), out, pa.scalar(None, pa.string()))


def offsets_and_data(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A (large) string or binary array's offsets (len + 1, into data) and data bytes, no copy."""
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    return offsets, data


def numpy_values(arr: pa.Array) -> np.ndarray:
    """A fixed-width array's values as numpy, no copy (whatever is stored in null slots)."""
    dtype = arr.type.to_pandas_dtype() if not pa.types.is_temporal(arr.type) else None
    if dtype is None:
        dtype = np.int64 if arr.type.bit_width == 64 else np.int32
    data = arr.buffers()[1]
    if data is None:
        return np.empty(0, dtype)
    return np.frombuffer(data, dtype=dtype)[arr.offset : arr.offset + len(arr)]


def _valid(arr: pa.Array) -> np.ndarray | None:
    """Which values are not null (None when none are)."""
    if not arr.null_count:
        return None
    return validity(arr)
