"""The data hashing profile (schemas/DATA-HASHING.md) against a pure-Python oracle.

The oracle below renders values one at a time with plain Python (``repr``, ``isoformat``,
``Decimal``, exact float32 arithmetic) and is deliberately unlike the vectorised code, so
agreement on golden tables and on generated ones is evidence both read the profile the same.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import math
import struct
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.data import hashing
from coordinator.data.hashing import (
    UnsupportedValueError,
    canonical_text,
    file_logical_hash,
    logical_hash,
)

EMPTY_SHA3 = "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"


# --- The oracle -------------------------------------------------------------------------


def oracle_text(table: pa.Table, event_time="event_time", system_time="system_time",
                cells: dict[str, list[str]] | None = None) -> bytes:
    """``cells``: each column's rendered values (``rendered_cells``), when the caller checks
    the same columns in several orders and renders them once."""
    if system_time in table.column_names:
        table = table.drop_columns([system_time])
    columns = ([cells[name] for name in table.column_names] if cells is not None
               else [[render(c.type, v) for v in column_values(c)] for c in table.columns])
    rows = ["\t".join(row).encode() + b"\n" for row in zip(*columns, strict=True)] if columns \
        else [b"\n"] * table.num_rows
    if event_time in table.column_names:
        times = column_values(table[event_time])
    else:
        times = [0] * table.num_rows
    # Event time first (nulls last), then the row's bytes.
    order = sorted(range(len(rows)), key=lambda i: (times[i] is None, times[i] or 0, rows[i]))
    return b"".join(rows[i] for i in order)


def rendered_cells(table: pa.Table) -> dict[str, list[str]]:
    """Each column's values as the oracle renders them, by column name."""
    assert len(set(table.column_names)) == table.num_columns, "cells are looked up by name"
    return {name: [render(c.type, v) for v in column_values(c)]
            for name, c in zip(table.column_names, table.columns, strict=True)}


def oracle_hash(table: pa.Table) -> str:
    return hashlib.sha3_256(oracle_text(table)).hexdigest()


def column_values(column: pa.ChunkedArray) -> list:
    """Python values; timestamps as integer microseconds since the epoch (UTC)."""
    if pa.types.is_timestamp(column.type):
        per_us = {"s": Fraction(10**6), "ms": Fraction(1000), "us": Fraction(1), "ns": Fraction(1, 1000)}
        raw = column.combine_chunks().view(pa.int64()).to_pylist()
        factor = per_us[column.type.unit]
        return [None if v is None else _whole(v * factor) for v in raw]
    return column.to_pylist()


def _whole(us: Fraction) -> int:
    if us.denominator != 1:
        raise UnsupportedValueError("sub-microsecond timestamp")
    return int(us)


def render(t: pa.DataType, v) -> str:
    if v is None:
        return "\\N"
    if pa.types.is_boolean(t):
        return "true" if v else "false"
    if pa.types.is_integer(t):
        return str(v)
    if pa.types.is_decimal(t):
        return format(v, "f")
    if pa.types.is_float64(t):
        return float_text(v, repr)
    if pa.types.is_float32(t):
        return float_text(v, float32_repr)
    if pa.types.is_timestamp(t):
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=v)
        return moment.isoformat(timespec="microseconds") + "Z"
    if pa.types.is_date(t):
        return v.isoformat()
    if pa.types.is_time(t):
        return v.isoformat(timespec="microseconds")
    if pa.types.is_string(t):
        return v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        return v.hex()
    raise AssertionError(f"oracle has no rendering for {t}")


def float_text(v: float, shortest) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return shortest(v)


def float32_repr(x: float) -> str:
    """Python repr notation of the shortest decimal that reads back as the same float32."""
    if x == 0:
        return repr(x)
    sign, x = ("-" if x < 0 else ""), abs(x)
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    lo = struct.unpack("<f", struct.pack("<I", bits - 1))[0] if bits > 1 else 0.0
    hi = struct.unpack("<f", struct.pack("<I", bits + 1))[0]
    exact = Fraction(x)
    below, above = Fraction(lo), Fraction(hi) if not math.isinf(hi) else 2 * exact - Fraction(lo)
    low, high = (below + exact) / 2, (exact + above) / 2
    even = bits % 2 == 0

    def reads_back(c: Fraction) -> bool:
        return low < c < high or (even and (c == low or c == high))

    for digits in range(1, 10):
        q = Decimal(x).adjusted() - digits + 1  # value = m * 10**q with `digits`-digit m
        m = int((Decimal(x).scaleb(-q)).to_integral_value(ROUND_HALF_EVEN))
        fits = [c for c in (m - 1, m, m + 1) if c > 0 and reads_back(Fraction(c) * Fraction(10) ** q)]
        if fits:
            # Closest to the value; an exact tie goes to the even digit, as in Python's repr.
            best = min(fits, key=lambda c: (abs(Fraction(c) * Fraction(10) ** q - exact), c % 2))
            return sign + repr_notation(best, q)
    raise AssertionError(f"no shortest form for {x}")


def repr_notation(m: int, q: int) -> str:
    """m * 10**q in Python float repr notation (fixed for exponents -4..15, else scientific)."""
    digits = str(m).rstrip("0")
    q += len(str(m)) - len(digits)
    exp = len(digits) - 1 + q
    if -4 <= exp < 16:
        point = len(digits) + q  # digits before the decimal point
        if q >= 0:
            return digits + "0" * q + ".0"
        if point > 0:
            return digits[:point] + "." + digits[point:]
        return "0." + "0" * -point + digits
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def test_oracle_float32_matches_known_values():
    assert float32_repr(struct.unpack("<f", struct.pack("<f", 0.1))[0]) == "0.1"
    assert float32_repr(16777216.0) == "16777216.0"
    assert float32_repr(struct.unpack("<f", struct.pack("<f", 3.4e38))[0]) == "3.4e+38"
    assert float32_repr(struct.unpack("<f", struct.pack("<I", 1))[0]) == "1e-45"
    assert repr_notation(15, -6) == "1.5e-05"
    assert repr_notation(1, 16) == "1e+16"
    assert repr_notation(12345, 6) == "12345000000.0"


# --- Golden vectors ---------------------------------------------------------------------


def ts(unit: str, tz: str | None, *values):
    return pa.array(values, pa.timestamp(unit, tz=tz))


def every_type_table() -> pa.Table:
    """One column per supported type, each with a null; three rows sharing one event time."""
    return pa.table({
        "system_time": ts("us", "UTC", 0, 0, 0, 0),
        "event_time": ts("ms", "UTC", *[1_600_000_000_000] * 2, 1_500_000_000_000, 1_600_000_000_000),
        "i32": pa.array([1, None, -2147483648, 7], pa.int32()),
        "i64": pa.array([None, 9223372036854775807, -1, 0], pa.int64()),
        "dec": pa.array([Decimal("1.50"), Decimal("-0.05"), None, Decimal("123.00")], pa.decimal128(5, 2)),
        "f64": pa.array([0.1, float("nan"), None, -0.0]),
        "f64_more": pa.array([float("inf"), float("-inf"), 1e16, 1.5e-05]),
        "f64_edge": pa.array([1e15, 1e-07, 123456789012.5, None]),
        "f32": pa.array([0.1, None, 16777216.0, -1e-07], pa.float32()),
        "flag": pa.array([True, False, None, True]),
        "ts_us_utc": ts("us", "UTC", 1_577_836_800_000_000, None, 1, -1),
        "ts_ms_naive": ts("ms", None, None, 1_577_836_800_123, 0, 86_399_999),
        "ts_ns_zoned": ts("ns", "America/Vancouver", 1_577_836_800_000_001_000, 0, None, 5_000),
        "ts_s": ts("s", "Asia/Kolkata", 0, None, 253_402_300_799, -62_135_596_800),
        "day": pa.array([dt.date(2020, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31), None]),
        "text": pa.array(["tab\there", "new\nline\r\n", "back\\slash \\N", None]),
        "unicode": pa.array(["héllo wörld", "日本語", "", "emoji 🎉"]),
        "blob": pa.array([b"\x00\x01\xfe\xff", b"", None, b"ODF"]),
    })


def cities_table() -> pa.Table:
    """The worked example in DATA-HASHING.md."""
    return pa.table({
        "system_time": ts("us", "UTC", *[1_700_000_000_000_000] * 3),
        "event_time": ts("ms", "UTC", 1_577_923_200_000, 1_577_836_800_000, 1_577_836_800_000),
        "city": pa.array(["Vancouver", "Toronto", None]),
        "population": pa.array([675218, 2731571, 1000], pa.int64()),
        "area": pa.array([115.18, 630.2, float("nan")]),
    })


def test_every_type_golden_text():
    text = canonical_text(every_type_table())
    assert text == oracle_text(every_type_table())
    assert text.decode().splitlines()[0] == (
        "2017-07-14T02:40:00.000000Z\t-2147483648\t-1\t\\N\t\\N\t1e+16\t123456789012.5\t"
        "16777216.0\t\\N\t1970-01-01T00:00:00.000001Z\t1970-01-01T00:00:00.000000Z\t\\N\t"
        "9999-12-31T23:59:59.000000Z\t9999-12-31\tback\\\\slash \\\\N\t\t\\N"
    )


def test_golden_hashes():
    # Literal digests: a change here is a change of the profile (and of every dataset's hashes).
    assert logical_hash(every_type_table()).hex() == oracle_hash(every_type_table()) == (
        "4fd4c4e17d2f1f17dd4d8f479abb4f143bbfcba901e2a58a9cd5fe0a608d05d1"
    )
    assert logical_hash(cities_table()).hex() == oracle_hash(cities_table()) == (
        "51e083d507f8986fff6566733fec8b19cf3219959ad8e7730abeff309dbd99b5"
    )
    ties = pa.table({"event_time": pa.array([dt.date(2020, 1, 2)] * 3), "v": ["b", "a\\", "a"]})
    assert canonical_text(ties) == b"2020-01-02\ta\n2020-01-02\ta\\\\\n2020-01-02\tb\n"
    assert logical_hash(ties).hex() == (
        "a30ad9297019fe514ec2501b33f68d3175460cafd5dbf275df3b7ab9a4d3369d"
    )
    empty = every_type_table().slice(0, 0)
    assert logical_hash(empty).hex() == EMPTY_SHA3


def test_cities_example_text():
    assert canonical_text(cities_table()) == (
        b"2020-01-01T00:00:00.000000Z\tToronto\t2731571\t630.2\n"
        b"2020-01-01T00:00:00.000000Z\t\\N\t1000\tNaN\n"
        b"2020-01-02T00:00:00.000000Z\tVancouver\t675218\t115.18\n"
    )


def test_floats_example():
    values = [0.1, 1.0, -0.0, 1e16, 1.5e-05, float("nan"), float("inf"), float("-inf"), None, 123456789012.0]
    table = pa.table({"x": pa.array(values), "y": pa.array(values, pa.float32())})
    assert canonical_text(table) == (  # no event time: rows in byte order
        b"-0.0\t-0.0\n-Infinity\t-Infinity\n0.1\t0.1\n1.0\t1.0\n1.5e-05\t1.5e-05\n"
        b"123456789012.0\t123456790000.0\n1e+16\t1e+16\nInfinity\tInfinity\nNaN\tNaN\n\\N\t\\N\n"
    )
    assert logical_hash(table).hex() == (
        "db242dcc25b8bbf0fd63267e6d08efb1bd7054d9b967b17ba59efe231b489893"
    )


@pytest.mark.parametrize(
    "value",
    [0.0, -0.0, 1.0, -1.0, 0.1, 1e-4, 9.999999999999999e-05, 1e-05, 1.5e-06, 1e-06, 1e-07,
     9.99e-10, 1e-10, 5e-324, 2.2250738585072014e-308, 1e10, 9999999999.0, 9999999999.5, 1e15,
     123456789012345.6, 1e16, 9999999999999998.0, 2.0**53, 1.7976931348623157e308, 1e22, 1e-300,
     0.30000000000000004, 1234567.0, 100.0,
     # Two shortest candidates equally close: the even last digit wins (…624.2, 3800204.8).
     2.0**50 + 0.25, 2.0**50 + 0.75, 3800204.75, 3800204.25],
)
def test_float_edges(value):
    for v in (value, -value):
        table = pa.table({"x": pa.array([v]), "y": pa.array([v], pa.float32())})
        assert canonical_text(table) == oracle_text(table), v


def test_decimal_notation():
    table = pa.table({
        "small": pa.array([Decimal("1E-7"), Decimal("-1E-7"), Decimal("0")], pa.decimal128(20, 7)),
        "negative_scale": pa.array([Decimal("1.23E+4"), Decimal("0"), None], pa.decimal128(5, -2)),
        "wide": pa.array(
            [Decimal("-12345678901234567890.12345"), None, Decimal("0.5")], pa.decimal256(40, 5)
        ),
        "narrow": pa.array([Decimal("9.9"), Decimal("-0.1"), None], pa.decimal32(2, 1)),
    })
    assert canonical_text(table) == (  # no event time: rows in byte order
        b"-0.0000001\t0\t\\N\t-0.1\n"
        b"0.0000000\t\\N\t0.50000\t\\N\n"
        b"0.0000001\t12300\t-12345678901234567890.12345\t9.9\n"
    )
    assert canonical_text(table) == oracle_text(table)


def test_other_types():
    table = pa.table({
        "t": pa.array([dt.time(1, 2, 3, 4), None], pa.time64("ns")),
        "t32": pa.array([dt.time(23, 59, 59), dt.time(0)], pa.time32("s")),
        "fixed": pa.array([b"\x00\xab", None], pa.binary(2)),
        "uuid": pa.array([b"\x12" * 16, None], pa.uuid()),
        "dict": pa.array(["x\ty", None]).dictionary_encode(),
        "large": pa.array(["a", "b\n"], pa.large_string()),
        "nothing": pa.array([None, None], pa.null()),
    })
    assert canonical_text(table) == (
        b"01:02:03.000004\t23:59:59.000000\t00ab\t" + b"12" * 16 + b"\tx\\ty\ta\t\\N\n"
        b"\\N\t00:00:00.000000\t\\N\t\\N\t\\N\tb\\n\t\\N\n"
    )


@pytest.mark.parametrize(
    "column",
    [
        pa.array([[1, 2]], pa.list_(pa.int64())),
        pa.array([{"a": 1}]),
        pa.array([1], pa.duration("s")),
        pa.array(np.array([1.5], np.float16)),
        ts("ns", None, 1),  # not a whole microsecond
        pa.array([-719163], pa.int32()).cast(pa.date32()),  # 0000-12-31
        ts("s", "UTC", 253_402_300_800),  # 10000-01-01
    ],
)
def test_refused(column):
    with pytest.raises(UnsupportedValueError, match="column 'c'"):
        logical_hash(pa.table({"c": column}))


# --- Properties -------------------------------------------------------------------------


def test_row_order_does_not_matter():
    table = every_type_table()
    for order in ([3, 2, 1, 0], [2, 0, 3, 1]):
        assert logical_hash(table.take(order)) == logical_hash(table)


def test_system_time_is_ignored():
    table = cities_table()
    other = table.set_column(0, "system_time", ts("us", "UTC", 1, 2, 3))
    assert logical_hash(other) == logical_hash(table) == logical_hash(table.drop_columns(["system_time"]))
    assert logical_hash(table, system_time_column="none") != logical_hash(table)


def test_chunking_does_not_matter():
    table = every_type_table()
    chunked = pa.concat_tables([table.slice(0, 1), table.slice(1, 2), table.slice(3)])
    assert chunked["i32"].num_chunks == 3
    assert logical_hash(chunked) == logical_hash(table)


def test_one_value_changes_the_hash():
    table = cities_table()
    changed = table.set_column(3, "population", pa.array([675218, 2731572, 1000], pa.int64()))
    assert logical_hash(changed) != logical_hash(table)


def test_without_event_time_rows_sort_by_bytes():
    table = pa.table({"b": [2, 1, 10]})
    assert canonical_text(table) == b"1\n10\n2\n"


def test_quotes_are_plain_bytes():
    """Rows are joined by a CSV writer unless a string holds a quote; both give the profile's text."""
    table = pa.table({"event_time": ts("s", None, 1, 1, 1), "v": ['say "hi"', "plain", None],
                      "n": [1, 2, 3]})
    t = "1970-01-01T00:00:01.000000Z\t"
    assert canonical_text(table) == f'{t}\\N\t3\n{t}plain\t2\n{t}say "hi"\t1\n'.encode()
    assert canonical_text(table) == oracle_text(table)
    without_quotes = table.filter(pa.array([False, True, True]))
    assert canonical_text(without_quotes) == oracle_text(without_quotes)


def test_empty_table():
    assert logical_hash(pa.table({"event_time": ts("us", "UTC")})).hex() == EMPTY_SHA3
    assert canonical_text(cities_table().slice(0, 0)) == b""


@pytest.fixture
def small_batches(monkeypatch):
    """Render batches of 4,096 rows instead of 65,536: the paths of a large table (segments cut
    between runs of equal times, several ahead in worker threads, a run longer than a batch
    split among the workers) taken by a table the oracle checks in a second."""
    monkeypatch.setattr(hashing, "_BATCH_ROWS", 4096)


def test_large_table_batches_agree_with_oracle(small_batches):
    """More rows than one render batch, with ties across batches."""
    n = 20_000
    table = pa.table({
        "event_time": pa.array([(i * 7919) % 1000 for i in range(n)], pa.int64()).cast(pa.timestamp("s")),
        "v": pa.array([f"{i % 97}\t{i}" if i % 5 else None for i in range(n)]),
    })
    assert logical_hash(table).hex() == oracle_hash(table)


# --- Generated tables against the oracle ------------------------------------------------

SPECIAL_TEXT = st.text(
    alphabet=st.sampled_from(list("ab\\\t\n\r\x00\x01 é日🎉N")), max_size=8
)
TIMEZONES = st.sampled_from([None, "UTC", "Asia/Kolkata", "America/Vancouver"])


@st.composite
def tables(draw):
    n = draw(st.integers(0, 25))
    unit = draw(st.sampled_from(["s", "ms", "us", "ns"]))
    scale = {"s": 1, "ms": 1, "us": 1, "ns": 1000}[unit]  # ns values stay whole microseconds
    # Few distinct event times, so ties (ordered by row bytes) are common.
    times = st.integers(-62_135_596_800, 253_402_300_799) if unit == "s" else st.integers(-10**12, 10**12)
    events = draw(st.lists(times, min_size=1, max_size=4))
    event = [draw(st.sampled_from(events)) * scale for _ in range(n)]

    def column(strategy):
        return draw(st.lists(st.none() | strategy, min_size=n, max_size=n))

    return pa.table({
        "system_time": pa.array([0] * n, pa.timestamp("us", "UTC")),
        "event_time": pa.array(event, pa.timestamp(unit, tz=draw(TIMEZONES))),
        "i": pa.array(column(st.integers(-(2**63), 2**63 - 1)), pa.int64()),
        "f": pa.array(column(st.floats(allow_nan=True, allow_infinity=True)), pa.float64()),
        "g": pa.array(column(st.floats(width=32)), pa.float32()),
        "s": pa.array(column(SPECIAL_TEXT), pa.string()),
        "d": pa.array(column(st.decimals(-(10**6), 10**6, places=3, allow_nan=False)), pa.decimal128(12, 3)),
        "t": pa.array(column(st.integers(-(10**15), 10**15)), pa.timestamp("us")),
        "b": pa.array(column(st.binary(max_size=4)), pa.binary()),
    })


@given(tables())
def test_matches_oracle(table):
    assert canonical_text(table) == oracle_text(table)


@given(st.lists(st.floats(allow_nan=False), min_size=1, max_size=50))
def test_floats_match_repr(values):
    table = pa.table({"x": pa.array(values), "y": pa.array(values, pa.float32())})
    assert canonical_text(table) == oracle_text(table)


# --- Larger tables: the paths taken only for many rows ----------------------------------


def test_large_columns_of_few_values_agree_with_oracle():
    """Lookups of small ranges and of few distinct values, with nulls, specials and -0.0."""
    rng = np.random.default_rng(5)
    n = 5_000

    def nulls(values, dtype):
        return pa.array(values, dtype, mask=rng.random(n) < 0.1)

    few_floats = np.array([0.0, -0.0, 0.1, 1.5e-05, 1e16, np.nan, np.inf, -2.5, 123456789012.0])
    times = rng.integers(-10**12, 10**12, 20) * 1000
    table = pa.table({
        "event_time": pa.array(np.sort(rng.integers(0, 10**14, n)), pa.timestamp("us", "UTC")),
        "near_times": nulls(rng.integers(-10**14, 10**13, n) * 1000, pa.timestamp("ns")),
        "small_int": nulls(rng.integers(-50, 50, n), pa.int16()),
        "whole_float": nulls(rng.integers(-300, 300, n).astype(float), pa.float64()),
        "whole_float_neg_zero": pa.array(np.where(rng.random(n) < 0.5, -0.0, 7.0)),
        "big_whole_float": pa.array(rng.integers(-(2**53) + 1, 2**53, n).astype(float)),
        "whole_float32": nulls(rng.integers(-2**24 + 1, 2**24, n).astype(np.float32), pa.float32()),
        "few_floats": nulls(rng.choice(few_floats, n), pa.float64()),
        "few_float32": pa.array(rng.choice(few_floats, n).astype(np.float32)),
        "few_times": nulls(rng.choice(times, n), pa.timestamp("ns", "Asia/Kolkata")),
        "times": nulls(rng.integers(-10**15, 10**15, n), pa.timestamp("us")),
        "far_times": pa.array(rng.integers(-62_135_596_800, 253_402_300_799, n), pa.timestamp("s")),
        "text": nulls(rng.choice(["a\\b", "tab\t", "x\r\ny", "plain", "日本"], n), pa.string()),
        "day": nulls(rng.integers(-1000, 1000, n).astype(np.int32), pa.int32()).cast(pa.date32()),
    })
    cells = rendered_cells(table)  # the oracle's rendering of a cell does not depend on the order
    assert canonical_text(table) == oracle_text(table, cells=cells)
    # The last column decides how rows end; put each kind last once.
    for name in table.column_names[1:]:
        reordered = table.select([c for c in table.column_names if c != name] + [name])
        assert canonical_text(reordered) == oracle_text(reordered, cells=cells), name


def test_one_long_run_of_ties_agrees_with_oracle(small_batches):
    """More rows than one render batch sharing one event time (sorted by bytes alone)."""
    n = 10_000
    table = pa.table({
        "event_time": pa.array([0] * n, pa.timestamp("s")),
        "v": pa.array(np.arange(n) * 7919 % 1000, pa.int64()),
        "w": pa.array([None if i % 11 == 0 else f"{i % 13}\\" for i in range(n)]),
    })
    assert logical_hash(table).hex() == oracle_hash(table)
    assert logical_hash(table.drop_columns(["event_time"])).hex() == oracle_hash(
        table.drop_columns(["event_time"])
    )


def test_event_time_already_in_order_and_nulls():
    table = pa.table({
        "event_time": pa.array([1, 1, 2, 3, 3, None, None], pa.timestamp("s")),
        "v": ["b", "a", "c", "e", "d", "g", "f"],
    })
    assert canonical_text(table) == oracle_text(table)
    dates = pa.table({
        "event_time": pa.array([86_400_000 * 3, 86_400_000 * 3, 0], pa.date64()),
        "v": ["b", "a", "c"],
    })
    assert canonical_text(dates) == oracle_text(dates)
    not_whole_days = pa.table({"event_time": pa.array([86_400_000 + 5], pa.date64())})
    with pytest.raises(UnsupportedValueError, match="column 'event_time'"):
        logical_hash(not_whole_days)


@pytest.mark.parametrize("shape", ["runs across batches", "out of order", "null event times",
                                   "one run"])
def test_a_file_hashed_a_batch_at_a_time_agrees_with_the_oracle(tmp_path, shape):
    """``file_logical_hash`` reads batches of a few KiB here: event-time runs span them."""
    n = 20_000
    times = np.repeat(np.arange(n // 7 + 1), 7)[:n]  # runs of 7 rows
    if shape == "out of order":
        times = times[::-1].copy()
    if shape == "one run":
        times = np.zeros(n, dtype=np.int64)
    event_time = pa.array(times, pa.int64()).cast(pa.timestamp("s", tz="UTC"))
    if shape == "null event times":
        event_time = pa.array([None if i >= n - 5 else v for i, v in enumerate(event_time.to_pylist())],
                              event_time.type)
    table = pa.table({"system_time": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
                      "event_time": event_time,
                      "v": pa.array(np.arange(n) * 7919 % 1000, pa.int64()),
                      "w": pa.array([f"{i % 13}" for i in range(n)])})
    path = tmp_path / "slice.parquet"
    pq.write_table(table, path, row_group_size=3_000)
    digest, rows = file_logical_hash(path, batch_bytes=4096)
    assert (digest.hex(), rows) == (oracle_hash(table), n)
