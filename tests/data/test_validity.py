"""``data.validity``: which values of an Arrow array are valid, as ``pc.is_valid`` says, read
from the validity bitmap where the array has one of its own."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from coordinator.data import validity

RNG = np.random.default_rng(7)
N = 1_000


def _nulls() -> np.ndarray:
    return RNG.random(N) < 0.2


ARRAYS = {
    "int64": pa.array(RNG.integers(0, 9, N), mask=_nulls()),
    "float32": pa.array(RNG.random(N).astype(np.float32), mask=_nulls()),
    "boolean": pa.array(RNG.random(N) < 0.5, mask=_nulls()),
    "string": pa.array([str(i) for i in range(N)], mask=_nulls()),
    "timestamp": pa.array(RNG.integers(0, 9, N), pa.timestamp("ms", "UTC"), mask=_nulls()),
    "struct": pa.StructArray.from_arrays([pa.array(range(N))], names=["a"], mask=pa.array(_nulls())),
    "list": pa.array([[i] if i % 3 else None for i in range(N)], pa.list_(pa.int64())),
    "dictionary": pa.array([None if i % 4 == 0 else str(i % 5) for i in range(N)]).dictionary_encode(),
    "no nulls": pa.array(np.arange(N)),
    "null": pa.nulls(N),
    "run-end encoded": pc.run_end_encode(pa.array([None if i % 7 < 3 else 1 for i in range(N)])),
    "union": pa.UnionArray.from_sparse(pa.array(np.zeros(N, np.int8)),
                                       [pa.array(range(N), mask=_nulls())]),
}


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize("offset", [0, 1, 13])
def test_validity_is_what_is_valid_says_from_any_offset(name, offset):
    arr = ARRAYS[name].slice(offset, N - offset - 3)
    got = validity(arr)
    assert got.dtype == np.bool_ and len(got) == len(arr)
    assert np.array_equal(got, pc.is_valid(arr).to_numpy(zero_copy_only=False))
