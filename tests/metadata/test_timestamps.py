"""Times and intervals in the spec's text syntax."""
from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta

import pytest

from coordinator.metadata.timestamps import (
    IntervalType,
    TimeParseError,
    Timestamp,
    epoch_nanos,
    format_timestamp,
    from_epoch_nanos,
    parse_interval,
    parse_timestamp,
    with_nanosecond,
)


@pytest.mark.parametrize("text, kind", [
    ("()", IntervalType.EMPTY),
    ("(-inf, inf)", IntervalType.UNBOUNDED),
    ("[2020-01-01T00:00:00Z, 2020-01-01T00:00:00Z]", IntervalType.SINGLETON),
    ("[2020-01-01T00:00:00Z, 2020-01-02T00:00:00Z]", IntervalType.CLOSED),
    ("(2020-01-01T00:00:00Z, 2020-01-02T00:00:00Z)", IntervalType.OPEN),
    ("(2020-01-01T00:00:00Z, 2020-01-02T00:00:00Z]", IntervalType.LEFT_HALF_OPEN),
    ("[2020-01-01T00:00:00Z, 2020-01-02T00:00:00Z)", IntervalType.RIGHT_HALF_OPEN),
    ("(-inf, 2020-01-02T00:00:00Z]", IntervalType.UNBOUNDED_CLOSED_RIGHT),
    ("(-inf, 2020-01-02T00:00:00Z)", IntervalType.UNBOUNDED_OPEN_RIGHT),
    ("[2020-01-01T00:00:00.5Z, inf)", IntervalType.UNBOUNDED_CLOSED_LEFT),
    ("(2020-01-01T00:00:00Z, inf)", IntervalType.UNBOUNDED_OPEN_LEFT),
])
def test_every_interval_form_parses_to_its_type_and_prints_back(text, kind):
    interval = parse_interval(text)
    assert interval.type is kind
    assert str(interval) == text


@pytest.mark.parametrize("text", [
    "[-inf, inf]", "[2020-01-02T00:00:00Z, 2020-01-01T00:00:00Z]", "2020-01-01T00:00:00Z", "[a, b]",
])
def test_malformed_intervals_are_refused(text):
    with pytest.raises(TimeParseError):
        parse_interval(text)


def test_offsets_are_converted_to_utc_and_printed_with_z():
    assert format_timestamp(parse_timestamp("2020-01-01T02:00:00+02:00")) == "2020-01-01T00:00:00Z"


def test_fractions_print_only_when_non_zero():
    assert format_timestamp(parse_timestamp("2020-01-01T00:00:00.250000Z")) == "2020-01-01T00:00:00.25Z"


def test_nanoseconds_are_kept_from_text_to_text():
    t = parse_timestamp("2020-01-01T02:00:00.123456789+02:00")
    assert (t.microsecond, t.nanosecond) == (123456, 789)
    assert format_timestamp(t) == "2020-01-01T00:00:00.123456789Z"
    assert format_timestamp(parse_timestamp("2020-01-01T00:00:00.0000001Z")) == "2020-01-01T00:00:00.0000001Z"


def test_a_time_without_sub_microsecond_digits_stays_a_plain_datetime():
    assert type(parse_timestamp("2020-01-01T00:00:00.123456000Z")) is datetime


def test_nanoseconds_order_times_within_a_microsecond():
    a = parse_timestamp("2020-01-01T00:00:00.000000001Z")
    b = parse_timestamp("2020-01-01T00:00:00.000000002Z")
    whole = parse_timestamp("2020-01-01T00:00:00Z")
    assert whole < a < b and b > a > whole and a != b and not a == b
    assert max(whole, b, a) is b and sorted([b, whole, a]) == [whole, a, b]
    assert a <= a and a >= a and whole <= a


def test_a_zero_nanosecond_timestamp_equals_and_hashes_as_the_datetime():
    plain = datetime(2020, 1, 1, tzinfo=UTC)
    zero = Timestamp(2020, 1, 1, tzinfo=UTC)
    assert zero == plain and plain == zero and hash(zero) == hash(plain)
    assert len({plain, zero, with_nanosecond(plain, 1)}) == 2


def test_adding_a_timedelta_keeps_the_nanoseconds():
    t = parse_timestamp("2020-01-01T00:00:00.000000789Z")
    assert format_timestamp(t + timedelta(microseconds=1)) == "2020-01-01T00:00:00.000001789Z"
    assert format_timestamp(timedelta(days=1) + t) == "2020-01-02T00:00:00.000000789Z"
    assert format_timestamp(t - timedelta(seconds=1)) == "2019-12-31T23:59:59.000000789Z"


def test_nanoseconds_survive_pickle_copy_and_str():
    t = parse_timestamp("2020-01-01T00:00:00.000000789Z")
    assert pickle.loads(pickle.dumps(t)).nanosecond == 789 and copy.deepcopy(t) == t
    assert str(t) == "2020-01-01 00:00:00.000000789+00:00"


def test_epoch_nanoseconds_round_trip_exactly():
    t = parse_timestamp("2262-04-11T23:47:16.854775807Z")
    assert epoch_nanos(t) == 2**63 - 1 and from_epoch_nanos(2**63 - 1) == t
    assert from_epoch_nanos(-1) == parse_timestamp("1969-12-31T23:59:59.999999999Z")


def test_an_out_of_range_nanosecond_is_refused():
    with pytest.raises(ValueError, match="0..999"):
        Timestamp(2020, 1, 1, tzinfo=UTC, nanosecond=1000)
