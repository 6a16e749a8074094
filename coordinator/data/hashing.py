"""Logical and physical hashes of data slices (profile: ``schemas/DATA-HASHING.md``).

The logical hash must not depend on how a slice happens to be stored (row order, chunking,
Parquet encoding), so it hashes a canonical text of the rows instead of the file bytes:

    every value → canonical text; a row = its columns (schema order, ``system_time`` dropped)
    joined by ``\\t`` and ended by ``\\n``; rows sorted by event time, then by their bytes;
    SHA3-256 of the concatenation.

Everything is done column-at-a-time with Arrow compute; Python only loops over columns,
record batches and a handful of float exponent groups, never over rows. The sorted rows are
one Arrow string array whose values buffer *is* the concatenated text, so it goes straight
into hashlib without copying.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["UnsupportedValueError", "canonical_text", "logical_hash", "physical_hash"]

# Rows are rendered per record batch of at most this many rows, batches in parallel (Arrow
# compute releases the GIL); small batches also keep strings far below the 2 GiB offset limit.
_BATCH_ROWS = 1 << 18
# Sorted rows are taken and hashed in runs of this many rows, bounding the extra memory.
_RUN_ROWS = 1 << 20
_NULL = "\\N"
# Escapes applied to strings in this order (the backslash first so escapes stay unambiguous).
_STRING_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"))
# 0001-01-01 and 9999-12-31 in days since the epoch: RFC 3339 needs four-digit years.
_MIN_DAY, _MAX_DAY = -719162, 2932896
_DAY_US = 86_400_000_000
_HEX = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), dtype=np.uint8).reshape(256, 2)


class UnsupportedValueError(ValueError):
    """A column's type or a value is outside the hashing profile."""


def logical_hash(
    table: pa.Table, event_time_column: str = "event_time", system_time_column: str = "system_time"
) -> bytes:
    """SHA3-256 digest (32 bytes) of the table's canonical text."""
    h = hashlib.sha3_256()
    for chunk in _sorted_rows(table, event_time_column, system_time_column):
        h.update(chunk)
    return h.digest()


def canonical_text(
    table: pa.Table, event_time_column: str = "event_time", system_time_column: str = "system_time"
) -> bytes:
    """The exact bytes `logical_hash` hashes (for tests and debugging; holds it all in memory)."""
    return b"".join(bytes(c) for c in _sorted_rows(table, event_time_column, system_time_column))


def physical_hash(source: str | os.PathLike | BinaryIO | pa.NativeFile) -> bytes:
    """SHA3-256 digest of a file's bytes, read in 1 MiB chunks (a path or an open binary file)."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return physical_hash(f)
    h = hashlib.sha3_256()
    while chunk := source.read(1 << 20):
        h.update(chunk)
    return h.digest()


def _sorted_rows(table: pa.Table, event_time_column: str, system_time_column: str) -> Iterator:
    """Yield memoryviews over the canonical rows, in hash order."""
    if system_time_column in table.column_names:
        table = table.drop_columns([system_time_column])
    if table.num_rows == 0:
        return
    if table.num_columns == 0:
        raise UnsupportedValueError("a table with rows but no data columns has no canonical text")
    batches = table.to_batches(max_chunksize=_BATCH_ROWS)
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        rows = pa.chunked_array(pool.map(_render_batch, batches), pa.large_string())
    keys = {"row": rows}
    if event_time_column in table.column_names:
        keys = {"event_time": table[event_time_column], "row": rows}
    # Event-time nulls (not allowed in ODF data anyway) sort last; ties fall back to the bytes.
    order = pc.sort_indices(pa.table(keys), [(k, "ascending", "at_end") for k in keys])
    for start in range(0, len(order), _RUN_ROWS):
        for chunk in rows.take(order[start : start + _RUN_ROWS]).chunks:
            yield _values_buffer(chunk)


def _render_batch(batch: pa.RecordBatch) -> pa.Array:
    """One string per row: the columns' canonical text joined by tabs, ended by a newline."""
    pieces = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            pieces.append(pc.fill_null(_render(column), _NULL))
        except (pa.ArrowInvalid, UnsupportedValueError) as e:  # e.g. nanoseconds not whole µs
            raise UnsupportedValueError(f"column {name!r}: {e}") from e
    pieces[-1] = _append(pieces[-1], "\n")
    # Joining costs per argument, so separators are the join's own, never extra scalar pieces.
    rows = pc.binary_join_element_wise(*pieces, "\t") if len(pieces) > 1 else pieces[0]
    return rows.cast(pa.large_string())  # 64-bit offsets: taking rows can never overflow


def _render(arr: pa.Array) -> pa.Array:
    """A column's canonical text as a string array, null where the value is null."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):  # e.g. arrow.uuid: rendered as its storage
        return _render(arr.storage)
    if pa.types.is_dictionary(t):
        return _render(arr.dictionary_decode())
    if pa.types.is_null(t) or pa.types.is_integer(t) or pa.types.is_boolean(t):
        return pc.cast(arr, pa.string())  # plain digits; true/false
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        return _render_float(arr)
    if pa.types.is_decimal(t):
        return _render_decimal(arr)
    if pa.types.is_timestamp(t):
        return _render_timestamp(arr)
    if pa.types.is_date(t):
        _check_range(pc.cast(arr, pa.date32()).view(pa.int32()), _MIN_DAY, _MAX_DAY)
        return pc.cast(arr, pa.string())  # YYYY-MM-DD
    if pa.types.is_time(t):
        return pc.cast(pc.cast(arr, pa.time64("us")), pa.string())  # HH:MM:SS.ffffff
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _escape(pc.cast(arr, pa.string()))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return _hex(pc.cast(arr, pa.binary()))
    if pa.types.is_fixed_size_binary(t):
        return _hex(pc.cast(arr, pa.binary()))
    raise UnsupportedValueError(f"type {t} has no canonical text in the hashing profile")


def _render_timestamp(arr: pa.Array) -> pa.Array:
    """RFC 3339 in UTC with six fraction digits: ``2020-01-01T00:00:00.000000Z``."""
    # Reading the stored instants as a naive timestamp gives UTC wall time whatever the zone
    # (and casting a zoned one to text is slow); the safe cast to microseconds refuses
    # nanoseconds that would be truncated.
    utc = pc.cast(arr.view(pa.timestamp(arr.type.unit)), pa.timestamp("us"))
    _check_range(utc.view(pa.int64()), _MIN_DAY * _DAY_US, (_MAX_DAY + 1) * _DAY_US - 1)
    text = pc.cast(utc, pa.string())  # 2020-01-01 00:00:00.000000
    return _append(pc.binary_replace_slice(text, 10, 11, "T"), "Z")


def _check_range(values: pa.Array, lo: int, hi: int) -> None:
    """Refuse dates and times outside years 0001-9999 (RFC 3339 has four-digit years)."""
    low, high = (v.as_py() for v in pc.min_max(values).values())
    if low is not None and (low < lo or high > hi):
        raise UnsupportedValueError("dates and timestamps must lie within years 0001-9999")


def _append(text: pa.Array, suffix: str) -> pa.Array:
    # A slice replaced past the end appends; cheaper than a join with a scalar.
    return pc.binary_replace_slice(text, 1 << 30, 1 << 30, suffix)


def _escape(text: pa.Array) -> pa.Array:
    """Escape backslash, tab, newline and carriage return, only in the rows that have them."""
    offsets, data = _offsets_and_data(text)
    data = data[offsets[0] : offsets[-1]]
    # These bytes never occur inside a multi-byte UTF-8 sequence, so a byte scan is exact.
    special = (data == 0x5C) | (data == 0x09) | (data == 0x0A) | (data == 0x0D)
    if not special.any():
        return text
    positions = np.flatnonzero(special) + offsets[0]
    rows = np.zeros(len(text), dtype=bool)
    rows[np.searchsorted(offsets, positions, side="right") - 1] = True
    escaped = text.filter(rows)
    for raw, replacement in _STRING_ESCAPES:
        escaped = pc.replace_substring(escaped, raw, replacement)
    return pc.replace_with_mask(text, pa.array(rows), escaped)


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

    Arrow's cast already gives the shortest digits (of the value's own precision) but writes
    fixed notation for decimal exponents -6..9 and ``1e-7`` style exponents, where Python's
    repr is fixed for exponents -4..15, always has a fraction (``1.0``) and writes ``1e-07``.
    The two agree on non-integral values with exponents -4..9, the common case; only the
    other values are rewritten. (Both break an exact tie between two shortest candidates
    towards the even digit.)
    """
    text = pc.cast(arr, pa.string())
    agree = pc.and_(_magnitude_in(arr, 1e-4, 1e10), pc.not_equal(pc.floor(arr), arr))
    rewrite = pc.invert(pc.fill_null(agree, True))  # NaN compares false: rewritten
    if not pc.any(rewrite).as_py():
        return text
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
    text = rewrite(text, integral, lambda t, _: _append(t, ".0"))
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
    offsets, data = _offsets_and_data(arr)
    hexed = _HEX[data[offsets[0] : offsets[-1]]].tobytes()
    new_offsets = ((offsets - offsets[0]) * 2).astype(np.int32)
    out = pa.Array.from_buffers(
        pa.string(), len(arr), [None, pa.py_buffer(new_offsets), pa.py_buffer(hexed)]
    )
    return pc.if_else(pc.is_valid(arr), out, pa.scalar(None, pa.string()))


def _offsets_and_data(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A (large) string or binary array's offsets (len + 1, into data) and data bytes, no copy."""
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    return offsets, data


def _values_buffer(arr: pa.Array) -> memoryview:
    """The bytes of a string array's values, i.e. its strings concatenated (no copy)."""
    offsets, data = _offsets_and_data(arr)
    return memoryview(data[offsets[0] : offsets[-1]])
