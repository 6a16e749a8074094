"""Data slices: canonical text, logical and physical hashes (``schemas/DATA-HASHING.md``).

Importing this package sets Arrow up for a short-lived process that touches data:

- pyarrow does not import pandas (``_arrow_without_pandas``): the coordinator uses none, and
  importing it costs a quarter of a second.
- Arrow allocates from jemalloc when it is built in and ``ARROW_DEFAULT_MEMORY_POOL`` does not
  choose (``_keeping_allocator``). mimalloc, Arrow's default, hands freed memory back to the
  system at once, so an ingest touches fresh pages again and again: measured on the 2-core
  build VM, a flights ingest spent 0.6 s in the kernel with mimalloc, 0.3 s with jemalloc.

Parquet files read batch by batch are opened with ``parquet_reader``; what is read a piece at
a time is read ahead, while the caller works on the piece before, with ``read_ahead``.
"""
from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# Work on a slice is split over threads (Arrow and numpy release the GIL) only from this many
# rows on: below it, starting the threads costs more than they save.
THREADS = os.cpu_count() or 2
PARALLEL_ROWS = 1 << 16


def _arrow_without_pandas() -> None:
    """Let pyarrow find pandas absent, unless something already imported it.

    pyarrow probes for pandas on the first conversion of Python values (``pa.array`` of a
    list, ``pa.scalar``, a compute call with a Python number), in its Python shim and in its
    C++ converter, and remembers the answer. Both probes are made here, once, with pandas
    hidden. Only the optional probes are affected: a pyarrow call that needs pandas
    (``to_pandas``) imports it as usual. Should a later pyarrow probe again, pandas is imported
    as before (slower, same results); tests/cli/test_startup.py notices.
    """
    if "pandas" in sys.modules:
        return

    class _Hide:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "pandas" or name.startswith("pandas."):
                raise ModuleNotFoundError("hidden from pyarrow's probe", name=name)
            return None

    import pyarrow as pa

    sys.meta_path.insert(0, _Hide)
    try:
        _ = pa.lib._pandas_api.have_pandas  # the shim's probe
        pa.array([0])  # the C++ converter's probe
    finally:
        sys.meta_path.remove(_Hide)


def parquet_reader(path):
    """A Parquet file to read batch by batch in bounded memory: without pre-buffering, with
    which pyarrow keeps every column chunk read until the file is closed (iterating an 845 MB
    file held 830 MB, and took 2.5 times as long)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, pre_buffer=False)


def arrow_of(values) -> Any:
    """A 1-D numpy array of numbers as an Arrow array sharing its memory (when contiguous).
    ``pa.array`` does the same, but its first call imports numpy.ma to look for a mask,
    12 ms of every pull."""
    import numpy as np
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype.kind not in "iuf" or values.ndim != 1:
        raise TypeError(f"arrow_of takes a 1-D array of numbers, not {values.dtype}")
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def read_ahead(items: Iterable[T], depth: int) -> Iterator[T]:
    """``items`` in order, up to ``depth`` of them made ahead in one background thread while
    the caller works on the one before: Arrow's readers release the GIL, so reading overlaps
    the caller's sorting, hashing and writing. The items are made in that thread only, one at a
    time; an error is raised where its item would have come. When the caller stops early, the
    item in the making is finished and ``items`` closed (its ``finally`` runs here)."""
    it = iter(items)
    end: Any = object()
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as worker:
            pending = deque(worker.submit(next, it, end) for _ in range(max(depth, 1)))
            try:
                while (item := pending.popleft().result()) is not end:
                    pending.append(worker.submit(next, it, end))
                    yield item
            finally:
                for made in pending:
                    made.cancel()
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def validity(arr) -> Any:
    """Which values of an Arrow array are not null, as a numpy bool array: unpacked from its
    validity bitmap (2 M values: 0.25 ms, where ``pc.is_valid(arr).to_numpy()``, which turns
    Arrow's bits into bytes one at a time, took 3.2 ms), or ``pc.is_valid``'s for an array
    whose nulls are not in a bitmap of its own (union, null, run-end encoded, dictionary,
    extension) or that has no bitmap."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t, bitmap = arr.type, arr.buffers()[0]
    if bitmap is None or isinstance(t, pa.BaseExtensionType) or pa.types.is_union(t) \
            or pa.types.is_null(t) or pa.types.is_run_end_encoded(t) or pa.types.is_dictionary(t):
        return pc.is_valid(arr).to_numpy(zero_copy_only=False)
    end = arr.offset + len(arr)
    bits = np.frombuffer(bitmap, np.uint8, count=(end + 7) // 8)
    return np.unpackbits(bits, bitorder="little", count=end)[arr.offset:].view(bool)


def _keeping_allocator() -> None:
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc keeps its default
        pass


_keeping_allocator()
_arrow_without_pandas()
