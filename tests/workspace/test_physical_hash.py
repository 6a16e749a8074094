"""``fsutil.physical_hash``: SHA3-256 of a file's bytes, however they are handed over."""
from __future__ import annotations

import hashlib
import io
import os

import pyarrow as pa

from coordinator.workspace.fsutil import physical_hash


def test_a_file_longer_than_a_read_hashes_as_its_bytes_from_a_path_or_an_open_file(tmp_path):
    data = os.urandom((8 << 20) + 12345)  # more than two 4 MiB reads
    path = tmp_path / "part.parquet"
    path.write_bytes(data)
    expected = hashlib.sha3_256(data).digest()
    assert physical_hash(path) == physical_hash(str(path)) == expected
    assert physical_hash(io.BytesIO(data)) == expected
    assert physical_hash(pa.BufferReader(data)) == expected
    with pa.OSFile(str(path)) as f:
        assert physical_hash(f) == expected


def test_bytes_in_memory_hash_as_themselves():
    data = b"ODF" * 1000
    expected = hashlib.sha3_256(data).digest()
    assert physical_hash(data) == physical_hash(memoryview(data)) == expected
    assert physical_hash(pa.py_buffer(data)) == expected


def test_an_empty_file_hashes_as_no_bytes(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert physical_hash(tmp_path / "empty") == hashlib.sha3_256(b"").digest()
