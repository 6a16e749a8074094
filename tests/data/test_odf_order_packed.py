"""The canonical record order (data/odf_order.py) where several key arrays share a pass and
the keys left are sorted at once (rows that stay tied pass after pass), where a key equal in
every row is left out, and where a float's second key (its bits) only orders -0.0 after 0.0
and NaNs by their bits. Checked as tests/data/test_odf_order.py checks: against one Arrow
sort over the documented keys, comparing the stored tables' digests."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from tests.data.test_odf_order import MS_UTC, assert_arrow_order


def shuffled_repeats(base: pa.Table, times: int, seed: int) -> pa.Table:
    repeated = pa.concat_tables([base] * times)
    return repeated.take(pa.array(np.random.default_rng(seed).permutation(repeated.num_rows)))


def test_nan_payloads_and_signed_zeros_of_repeated_rows_sort_by_their_bits():
    bits64 = np.array([0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000002,
                       0x8000000000000000, 0, 0x3FF0000000000000], np.uint64)
    bits32 = np.array([0x7FC00001, 0xFFC00000, 0x7F800002, 0x80000000, 0, 0x3F800000],
                      np.uint32)
    rng = np.random.default_rng(4)
    n = 600
    base = pa.table({
        "event_time": pa.array(np.zeros(n, np.int64), MS_UTC),
        "f64": pa.array(bits64[rng.integers(0, 6, n)].view(np.float64),
                        mask=rng.random(n) < 0.1),
        "f32": pa.array(bits32[rng.integers(0, 6, n)].view(np.float32)),
        "k": pa.array(rng.integers(0, 3, n), pa.int8()),
    })
    assert_arrow_order(shuffled_repeats(base, 20, 5))


def test_columns_equal_in_every_row_are_left_out():
    rng = np.random.default_rng(6)
    n = 2_000
    base = pa.table({
        "event_time": pa.array(np.full(n, 7_000, np.int64), MS_UTC),
        "year": pa.array(np.full(n, 2013, np.int64)),
        "x": pa.array(rng.integers(0, 50, n) / 4),
        "same_float": pa.array(np.full(n, 2.5)),
        "same_text": pa.array(["EWR"] * n),
        "y": pa.array(rng.choice(["a", "b", None], n)),
    })
    assert_arrow_order(shuffled_repeats(base, 5, 7))


def test_unique_rows_beside_repeated_ones_sort_as_one_arrow_sort():
    rng = np.random.default_rng(8)
    n = 3_000
    unique = pa.table({"event_time": pa.array(rng.permutation(n) * 1000, MS_UTC),
                       "a": pa.array(rng.integers(0, 2**40, n)),
                       "b": pa.array(rng.random(n))})
    tied = pa.table({"event_time": pa.array(np.full(n, 1000, np.int64), MS_UTC),
                     "a": pa.array(rng.integers(0, 2**40, n) >> 30),
                     "b": pa.array(rng.integers(0, 3, n) / 2)})
    assert_arrow_order(shuffled_repeats(pa.concat_tables([unique, tied]), 3, 9))
