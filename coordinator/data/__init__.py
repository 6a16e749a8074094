"""Data slices: canonical text, logical and physical hashes (``schemas/DATA-HASHING.md``).

Importing this package sets Arrow up for a short-lived process that touches data:

- pyarrow does not import pandas (``_arrow_without_pandas``): the coordinator uses none, and
  importing it costs a quarter of a second.
- Arrow allocates from jemalloc when it is built in and ``ARROW_DEFAULT_MEMORY_POOL`` does not
  choose (``_keeping_allocator``). mimalloc, Arrow's default, hands freed memory back to the
  system at once, so an ingest touches fresh pages again and again: measured on the 2-core
  build VM, a flights ingest spent 0.6 s in the kernel with mimalloc, 0.3 s with jemalloc.

Parquet files read batch by batch are opened with ``parquet_reader``.
"""
from __future__ import annotations

import os
import sys


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
