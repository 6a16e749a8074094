"""The canonical record order of current-ODF slices (data/odf_order.py) where its sort is
cut into passes: ordinals wider than fit beside the tie groups and row positions (sorted by
their high bits, then the rest), values that share trailing zero bits (whole seconds, whole
numbers as floats), rows repeated many times, so that every key is sorted among ties, and
slices large enough that passes sort parts of whole tie groups in threads.

Each is checked against one Arrow sort over the documented keys (tests/data/test_odf_slice.py's
``arrow_sorted``), comparing the stored tables' digests: rows equal on every key hash alike.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from coordinator.data import PARALLEL_ROWS
from coordinator.data.arrow_digest import record_digest
from coordinator.data.odf_order import _by_parts
from tests.data.test_odf_slice import arrow_sorted, build

MS_UTC = pa.timestamp("ms", tz="UTC")


def assert_arrow_order(table: pa.Table) -> None:
    stored = build(table).select(table.column_names)
    assert record_digest(stored) == record_digest(arrow_sorted(table).cast(stored.schema))


def test_wide_values_tied_on_their_high_bits_sort_by_the_rest():
    rng = np.random.default_rng(1)
    n = 20_000
    high = rng.integers(-3, 3, n) << 50  # 53 significant bits: more than fit in one pass
    assert_arrow_order(pa.table({
        "event_time": pa.array(np.zeros(n, np.int64), MS_UTC),
        "wide": pa.array(high + rng.integers(0, 4, n)),
        "u": pa.array((rng.integers(0, 3, n).astype(np.uint64) << np.uint64(62))
                      + rng.integers(0, 2, n).astype(np.uint64)),
    }))


def test_values_sharing_trailing_zero_bits_keep_their_order():
    rng = np.random.default_rng(2)
    n = 20_000
    seconds = rng.integers(0, 40, n) * 1000  # whole seconds in milliseconds: ties
    whole = rng.integers(-500, 500, n).astype(np.float64)
    whole[rng.integers(0, n, 50)] = -0.0
    whole[rng.integers(0, n, 50)] = np.nan
    assert_arrow_order(pa.table({
        "event_time": pa.array(seconds // 10_000 * 10_000, MS_UTC),
        "at": pa.array(seconds, MS_UTC),
        "delay": pa.array(whole, mask=rng.random(n) < 0.05),
        "ratio": pa.array(rng.integers(-64, 64, n).astype(np.float32) / 8),
    }))


def test_rows_repeated_many_times_sort_as_one_arrow_sort():
    rng = np.random.default_rng(3)
    distinct = 500
    base = pa.table({
        "event_time": pa.array(rng.integers(0, 20, distinct) * 3_600_000, MS_UTC),
        "carrier": pa.array(rng.choice(["AA", "B6", "UA", None], distinct)),
        "dep_delay": pa.array(rng.integers(-40, 900, distinct) / 1.0),
        "flight": pa.array(rng.integers(1, 4000, distinct), pa.int32()),
    })
    repeated = pa.concat_tables([base] * 30)
    assert_arrow_order(repeated.take(pa.array(rng.permutation(repeated.num_rows))))


def test_a_large_slice_sorted_in_parts_of_whole_tie_groups_sorts_as_one_arrow_sort():
    # over PARALLEL_ROWS units, with ties left after the event time (so passes sort parts
    # in threads) and rows repeated (so the last keys are sorted at once, in parts too)
    rng = np.random.default_rng(4)
    distinct = 20_000
    base = pa.table({
        "event_time": pa.array(rng.integers(0, 40, distinct) * 3_600_000, MS_UTC),
        "wide": pa.array(rng.integers(-3, 3, distinct) << 50),
        "code": pa.array(rng.choice(["AA", "B6", "UA", None], distinct)),
        "delay": pa.array(rng.integers(-40, 900, distinct) / 4.0),
    })
    repeated = pa.concat_tables([base] * 4)
    assert repeated.num_rows > PARALLEL_ROWS
    assert_arrow_order(repeated.take(pa.array(rng.permutation(repeated.num_rows))))


def test_parts_cover_the_units_and_cut_only_between_tie_groups():
    group = np.repeat(np.arange(7, dtype=np.uint64), [1, 40_000, 3, 50_000, 9, 30_000, 2])
    parts = _by_parts(lambda bounds: bounds, group)
    assert parts[0][0] == 0 and parts[-1][1] == len(group) and len(parts) > 1
    assert all(a[1] == b[0] for a, b in zip(parts[:-1], parts[1:], strict=True))
    assert all(group[end - 1] != group[end] for _, end in parts[:-1])
    assert _by_parts(lambda bounds: bounds, np.zeros(100_000, np.uint64)) == [(0, 100_000)]
