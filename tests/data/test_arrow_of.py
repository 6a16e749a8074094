"""``data.arrow_of``: numpy numbers as Arrow arrays, as ``pa.array`` makes them."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from coordinator.data import arrow_of


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.float64])
def test_numbers_become_the_array_pa_array_makes(dtype):
    values = np.arange(-3, 7).astype(dtype)
    assert arrow_of(values).equals(pa.array(values))


def test_a_strided_view_is_copied_in_order():
    values = np.arange(10, dtype=np.int64)[::3]
    assert arrow_of(values).to_pylist() == [0, 3, 6, 9]


def test_booleans_are_refused_rather_than_misread_as_bytes():
    with pytest.raises(TypeError, match="numbers"):
        arrow_of(np.array([True, False]))
