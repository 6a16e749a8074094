"""Times and intervals in the spec's text syntax."""
from __future__ import annotations

import pytest

from coordinator.metadata.timefmt import (
    IntervalType,
    TimeParseError,
    format_timestamp,
    parse_interval,
    parse_timestamp,
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


def test_sub_microsecond_times_are_refused_not_rounded():
    with pytest.raises(TimeParseError, match="finer than microseconds"):
        parse_timestamp("2020-01-01T00:00:00.123456789Z")
