"""ODF's ``arrow0-sha3-256`` logical hash: arrow-digest's ``RecordDigestV0`` over SHA3-256
(algorithm: ``schemas/ARROW-DIGEST.md``).

Invariants:

- The digest is a function of the column names, nesting, types and the values in row order:
  how the rows are cut into batches, chunks and slices (array offsets) does not change it
  (but for the reference's one corner case of nested struct nulls, schemas/ARROW-DIGEST.md
  "Nulls"); reordering rows does. Dictionary columns hash as their decoded values.
- Each leaf column feeds its own SHA3-256 with one byte stream: its type header, then every
  element's encoding. Python loops over columns, batches and nesting levels, never over rows:
  the stream of a chunk is built whole with numpy and Arrow compute, then handed to hashlib
  (which releases the GIL on large updates, so columns hash in parallel threads).
- Which elements count as null follows the reference exactly, including its way of combining a
  struct's validity with its children's (see "Nulls" in the algorithm); an element that counts
  as valid is hashed from whatever its buffers hold.
- Types the reference cannot hash are refused when the digest is set up, before any data is
  read, with ``UnsupportedTypeError`` naming the column.
"""
from __future__ import annotations

import hashlib
import os
import struct
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import Invalid
from ..metadata.multiformats import ARROW0_SHA3_256, Multihash
from . import parquet_reader, read_ahead, validity

__all__ = [
    "MULTICODEC", "RecordDigest", "UnsupportedTypeError", "array_digest", "element_bytes",
    "file_digest", "multibase16", "multihash", "record_digest", "type_header",
]

MULTICODEC = ARROW0_SHA3_256
# Rows per batch when a Parquet file is streamed (kamu reads 10,000; any size gives the same
# digest, larger batches mean fewer, bigger hashlib updates).
_FILE_BATCH_ROWS = 1 << 17

# Rows encoded at a time: bounds the intermediate arrays to a few MB per column, which also
# keeps them in cache (measured: a 4M-row batch hashed about 10% faster so than whole).
_SLICE_ROWS = 1 << 16

_NULL = b"\x00"  # what every null element contributes, whatever its type
_NO_DATA = np.empty(0, np.uint8)
# Bodies are laid out in a padded grid (one row per element) when the grid is at most this
# many times the size of the stream (measured: 3x faster than Arrow's join for equal widths,
# even for nearly equal ones, slower for widely varying ones).
_GRID_SLACK = 1.5
# Bodies of fewer distinct sizes than this, all shorter than that, are scattered in one copy
# per size (measured on names of 3 to 15 bytes: 3x faster than the masked grid, about the
# time SHA3 takes over them).
_SCATTER_PASSES = 32
_SCATTER_SIZES = 1 << 16


class UnsupportedTypeError(Invalid, TypeError):
    """A column's Arrow type has no encoding in arrow-digest V0."""


# --- Type headers ---------------------------------------------------------------------------

_TIME_UNIT = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def _u16(n: int) -> bytes:
    return struct.pack("<H", n)


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def type_header(t: pa.DataType, column: str = "column") -> bytes:
    """The bytes a column's hasher starts with (the reference's ``hash_data_type``)."""
    t = _hashed_type(t)
    if pa.types.is_boolean(t):
        return _u16(5)
    if pa.types.is_integer(t):
        return _u16(1) + bytes([pa.types.is_signed_integer(t)]) + _u64(t.bit_width)
    if pa.types.is_floating(t):
        return _u16(2) + _u64(t.bit_width)
    if pa.types.is_timestamp(t):
        tz = b"\x00" if t.tz is None else _u64(len(t.tz.encode())) + t.tz.encode()
        return _u16(9) + _u16(_TIME_UNIT[t.unit]) + tz
    if pa.types.is_date32(t):
        return _u16(7) + _u64(32) + _u16(0)
    if pa.types.is_date64(t):
        return _u16(7) + _u64(64) + _u16(1)
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return _u16(8) + _u64(t.bit_width) + _u16(_TIME_UNIT[t.unit])
    if _is_decimal(t):
        # The scale is a signed byte widened to 64 bits (two's complement when negative).
        return _u16(6) + _u64(t.bit_width) + _u64(t.precision) + struct.pack("<q", t.scale)
    if _is_binary_like(t):
        return _u16(3)
    if _is_string_like(t):
        return _u16(4)
    if _is_list_like(t):
        return _u16(11) + type_header(t.value_type, column)
    raise UnsupportedTypeError(
        f"column {column!r}: type {t} has no arrow-digest V0 encoding; cast it to a supported "
        "type (integers, floats, decimals, dates, times, timestamps, booleans, strings, "
        "binaries, lists and structs of them)"
    )


def _hashed_type(t: pa.DataType) -> pa.DataType:
    """The type whose encoding a column gets: dictionaries decoded, extensions as storage."""
    if isinstance(t, pa.BaseExtensionType):
        return _hashed_type(t.storage_type)
    if pa.types.is_dictionary(t):
        return _hashed_type(t.value_type)
    if _is_list_like(t):
        value = _hashed_type(t.value_type)
        if value == t.value_type:
            return t
        if pa.types.is_fixed_size_list(t):
            return pa.list_(t.value_field.with_type(value), t.list_size)
        if pa.types.is_large_list(t):
            return pa.large_list(t.value_field.with_type(value))
        return pa.list_(t.value_field.with_type(value))
    return t


def _is_decimal(t: pa.DataType) -> bool:
    return isinstance(t, (pa.Decimal32Type, pa.Decimal64Type, pa.Decimal128Type,
                          pa.Decimal256Type))


def _is_binary_like(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t))


def _is_string_like(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_list_like(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _fixed_width(t: pa.DataType) -> int | None:
    """Bytes per value of the types hashed as their stored little-endian bytes."""
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)
            or _is_decimal(t)) and not pa.types.is_duration(t) and not pa.types.is_interval(t):
        return t.bit_width // 8
    return None


# --- The record digest ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    """A non-struct column: where it sits in the struct nesting and the type it is hashed as."""

    path: tuple[int, ...]  # child indexes from the top-level column down
    name: str  # dotted, for messages
    type: pa.DataType  # dictionaries decoded


class RecordDigest:
    """Incremental ``RecordDigestV0<Sha3_256>`` over record batches of one schema.

    ``update`` the batches in row order, then ``finish`` once. Given a thread ``pool``, the
    leaf columns of each batch are encoded and hashed in parallel in it.
    """

    def __init__(self, schema: pa.Schema, pool: Executor | None = None):
        self.schema = schema
        self._pool = pool
        self._header = hashlib.sha3_256()
        self._leaves: list[_Leaf] = []
        self._walk(list(schema), (), "", 0)
        self._hashers = [hashlib.sha3_256(type_header(leaf.type, leaf.name))
                         for leaf in self._leaves]

    def _walk(self, fields: list[pa.Field], path: tuple[int, ...], prefix: str,
              level: int) -> None:
        """Feed the name and nesting level of every field, depth first; collect the leaves."""
        for i, field in enumerate(fields):
            name = field.name.encode()
            self._header.update(_u64(len(name)) + name + _u64(level))
            t = _hashed_type(field.type)
            if pa.types.is_struct(t):
                self._walk(list(t), path + (i,), prefix + field.name + ".", level + 1)
            else:
                type_header(t, prefix + field.name)  # refuse unsupported types now
                self._leaves.append(_Leaf(path + (i,), prefix + field.name, t))

    def update(self, data: pa.RecordBatch | pa.Table) -> None:
        """Hash the next rows (a batch, or a table's batches in order)."""
        if data.schema.names != self.schema.names or data.schema.types != self.schema.types:
            raise Invalid(f"data with columns {_columns(data.schema)} does not match the "
                          f"digest's columns {_columns(self.schema)}; hash each schema with its "
                          "own digest")
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            jobs = [(h, _leaf_array(batch, leaf))
                    for h, leaf in zip(self._hashers, self._leaves, strict=True)]
            if self._pool is None or len(jobs) < 2:
                for h, (arr, parent) in jobs:
                    _hash_column(h, arr, parent)
            else:
                running: list[Future] = [self._pool.submit(_hash_column, h, arr, parent)
                                         for h, (arr, parent) in jobs]
                for f in running:
                    f.result()

    def finish(self) -> bytes:
        """The 32-byte digest: SHA3-256 of the field headers and then every leaf's digest."""
        for h in self._hashers:
            self._header.update(h.digest())
        return self._header.digest()


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def record_digest(data: pa.RecordBatch | pa.Table) -> bytes:
    """``RecordDigestV0<Sha3_256>`` of one batch or table (32 bytes)."""
    d = RecordDigest(data.schema)
    d.update(data)
    return d.finish()


def array_digest(arr: pa.Array | pa.ChunkedArray) -> bytes:
    """``ArrayDigestV0<Sha3_256>`` of one non-struct column: its type header and elements."""
    t = _hashed_type(arr.type)
    h = hashlib.sha3_256(type_header(t))
    for chunk in arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]:
        chunk = _storage(chunk)
        _hash_column(h, chunk if chunk.type == t else chunk.cast(t), None)
    return h.digest()


def element_bytes(arr: pa.Array) -> pa.Array:
    """Each element's encoding (its own nulls as null markers), as a non-null LargeBinary
    array: distinct elements of one type get distinct bytes (lengths prefix every body)."""
    arr = _storage(arr)
    t = _hashed_type(arr.type)
    if arr.type != t:
        arr = arr.cast(t)
    data, ends = _encode(arr, _own_validity(arr), offsets=True)
    assert ends is not None
    return pa.Array.from_buffers(pa.large_binary(), len(arr),
                                 [None, pa.py_buffer(ends.astype(np.int64)),
                                  pa.py_buffer(np.ascontiguousarray(data))])


def file_digest(path: str | os.PathLike, threads: int | None = None,
                read_as: pa.Schema | None = None) -> bytes:
    """``RecordDigestV0<Sha3_256>`` of a Parquet file's rows, read batch by batch, its columns
    hashed in parallel threads while the next batch is read. Given ``read_as`` (the file's
    schema with some types changed), each batch is cast to it before it is hashed."""
    f = parquet_reader(path)
    batches = f.iter_batches(batch_size=_FILE_BATCH_ROWS, use_threads=False)
    schema = f.schema_arrow if read_as is None else read_as
    cast = read_as is not None and not read_as.equals(f.schema_arrow)
    with ThreadPoolExecutor(threads or os.cpu_count()) as pool:
        digest = RecordDigest(schema, pool)
        for batch in read_ahead(batches, 1):
            digest.update(batch.cast(schema) if cast else batch)
    return digest.finish()


def multihash(digest: bytes) -> bytes:
    """The digest as a multihash: varint(0x300016), varint(length), digest."""
    return Multihash(MULTICODEC, digest).to_bytes()


def multibase16(digest: bytes) -> str:
    """The multihash in multibase base16 (``f`` then lowercase hex), as ODF writes hashes."""
    return str(Multihash(MULTICODEC, digest))


# --- Nulls ----------------------------------------------------------------------------------
# A validity is a numpy bool array (True = valid) or None for "no nulls". The reference keeps
# an array's own validity only when it has nulls, and combines a parent's with a child's by OR
# when both have nulls; when exactly one of them has nulls that one counts; a parent combined
# to all-valid hides the child's own nulls (its arms match neither case).


def _own_validity(arr: pa.Array) -> np.ndarray | None:
    if not arr.null_count:
        return None
    return validity(arr)


def _combine(parent: np.ndarray | None, own: np.ndarray | None) -> np.ndarray | None:
    """What a child hands on: ``own`` (an array's validity) always has a null; ``parent`` may
    be an all-valid result of an OR above, which the reference counts as having none."""
    if parent is None:
        return own
    if parent.all():
        return None
    return parent if own is None else parent | own


def _leaf_array(batch: pa.RecordBatch, leaf: _Leaf) -> tuple[pa.Array, np.ndarray | None]:
    """A leaf column's array and the validity its struct parents hand down."""
    arr: pa.Array = batch.column(leaf.path[0])
    parent: np.ndarray | None = None
    for i in leaf.path[1:]:
        arr = _storage(arr)
        parent = _combine(parent, _own_validity(arr))
        arr = arr.field(i)
    arr = _storage(arr)
    if arr.type != leaf.type:
        arr = arr.cast(leaf.type)  # dictionaries decoded
    return arr, parent


def _storage(arr: pa.Array) -> pa.Array:
    return arr.storage if isinstance(arr, pa.ExtensionArray) else arr


def _bitmap(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))


# --- Element encodings ----------------------------------------------------------------------


def _hash_column(h, arr: pa.Array, parent: np.ndarray | None) -> None:
    """Feed a leaf array's elements to its hasher, a slice at a time. The validity is settled
    for the whole array first: the reference asks "any nulls?" per batch, not per slice."""
    valid = _combine(parent, _own_validity(arr))
    for start in range(0, len(arr), _SLICE_ROWS):
        part = None if valid is None else valid[start:start + _SLICE_ROWS]
        data, _ = _encode(arr.slice(start, _SLICE_ROWS), part, offsets=False)
        h.update(data)


def _encode(arr: pa.Array, valid: np.ndarray | None, offsets: bool
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """The byte stream of ``arr``'s elements in order and, when ``offsets``, where each
    element's bytes start and end in it (len + 1 positions)."""
    t = arr.type
    n = len(arr)
    if not n:
        return _NO_DATA, (np.zeros(1, np.int64) if offsets else None)
    width = _fixed_width(t)
    if width is not None:
        raw = _fixed_bytes(arr, width)
        if valid is None:
            return raw.reshape(-1), (np.arange(n + 1) * width if offsets else None)
        return _with_null_markers(raw, valid, offsets)
    if pa.types.is_boolean(t):
        data = _bits(arr).astype(np.uint8) + 1  # false 1, true 2
        if valid is not None:
            data[~valid] = 0
        return data, (np.arange(n + 1) if offsets else None)
    if pa.types.is_fixed_size_binary(t):
        size = t.byte_width
        ends = (np.arange(n + 1, dtype=np.int64) + arr.offset) * size
        return _length_prefixed(np.diff(ends), ends, _bytes(arr.buffers()[1]), valid, offsets)
    if _is_binary_like(t) or _is_string_like(t):
        if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
            arr = arr.cast(pa.large_binary())
        # The bodies as stored: a slot that counts as valid is hashed whatever its own validity.
        ends = _value_offsets(arr)
        return _length_prefixed(np.diff(ends), ends, _bytes(arr.buffers()[2]), valid, offsets)
    if _is_list_like(t):
        return _encode_list(arr, valid, offsets)
    raise UnsupportedTypeError(f"type {t} has no arrow-digest V0 encoding")


def _fixed_bytes(arr: pa.Array, width: int) -> np.ndarray:
    """The stored bytes of a fixed-width array, one row of ``width`` per element (no copy)."""
    data = arr.buffers()[1]
    flat = np.frombuffer(data, np.uint8)[arr.offset * width:(arr.offset + len(arr)) * width]
    return flat.reshape(len(arr), width)


def _bits(arr: pa.Array) -> np.ndarray:
    """A boolean array's stored values (whatever sits under its nulls)."""
    bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].astype(bool)


def _with_null_markers(raw: np.ndarray, valid: np.ndarray, offsets: bool
                       ) -> tuple[np.ndarray, np.ndarray | None]:
    """Fixed-width elements, each null one replaced by the one-byte null marker: all but
    the first byte of each null element dropped, in one copy, then those bytes zeroed
    (measured: twice as fast as masking a copy of the grid row by row)."""
    width = raw.shape[1]
    nulls = np.flatnonzero(~valid)
    dropped = (nulls[:, None] * width + np.arange(1, width)).reshape(-1)
    out = np.delete(raw.reshape(-1), dropped)
    out[nulls * width - np.arange(len(nulls)) * (width - 1)] = 0
    return out, (_ends(np.where(valid, width, 1)) if offsets else None)


def _read_rows(grid: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """The first ``widths[i]`` bytes of every row ``i`` of ``grid``, row after row. Only the
    rows narrower than the grid get a per-byte mask (nulls, short values: the few)."""
    narrow = np.flatnonzero(widths != grid.shape[1])
    if not len(narrow):
        return grid.reshape(-1)
    keep = np.ones(grid.shape, bool)
    keep[narrow] = np.arange(grid.shape[1]) < widths[narrow, None]
    return grid[keep]


def _ends(widths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(widths)])


def _value_offsets(arr: pa.Array) -> np.ndarray:
    """A binary, string or list array's n + 1 offsets (positions in its data or child)."""
    t = arr.type
    large = pa.types.is_large_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_list(t)
    return np.frombuffer(arr.buffers()[1], np.int64 if large else np.int32)[
        arr.offset:arr.offset + len(arr) + 1].astype(np.int64)


def _bytes(buffer: pa.Buffer | None) -> np.ndarray:
    return _NO_DATA if buffer is None else np.frombuffer(buffer, np.uint8)


def _length_prefixed(lengths: np.ndarray, ends: np.ndarray, data: np.ndarray,
                     valid: np.ndarray | None, offsets: bool
                     ) -> tuple[np.ndarray, np.ndarray | None]:
    """Each valid element as its length (u64 little-endian: bytes, or items for a list) then
    its body, ``data[ends[i]:ends[i + 1]]``; each null one as the null marker."""
    sizes = np.diff(ends)
    longest = int(sizes.max())
    grid = len(sizes) * (8 + longest) <= _GRID_SLACK * (8 * len(sizes) + int(ends[-1] - ends[0]))
    # (np.isin over two values is 10x slower than the two comparisons)
    if grid and bool(((sizes == longest) | (sizes == 0)).all()):
        return _short_prefixed(lengths, ends, longest, data, valid, offsets)
    if longest < _SCATTER_SIZES:
        counts = np.bincount(sizes if valid is None else sizes[valid], minlength=1)
        if np.count_nonzero(counts[1:]) <= _SCATTER_PASSES:
            return _scattered(lengths, ends, data, valid, offsets, counts)
    if grid:
        return _short_prefixed(lengths, ends, longest, data, valid, offsets)
    n = len(lengths)
    bodies = pa.Array.from_buffers(pa.large_binary(), n,
                                   [None, pa.py_buffer(ends), pa.py_buffer(data)])
    prefixes = pa.Array.from_buffers(
        pa.binary(8), n, [_bitmap(valid), pa.py_buffer(lengths.astype("<u8"))]
    ).cast(pa.large_binary())
    joined = pc.binary_join_element_wise(prefixes, bodies, pa.scalar(b"", pa.large_binary()))
    joined = pc.fill_null(joined, pa.scalar(_NULL, pa.large_binary()))
    out_ends = _value_offsets(joined)
    out = np.frombuffer(joined.buffers()[2], np.uint8)[out_ends[0]:out_ends[-1]]
    return out, (out_ends - out_ends[0] if offsets else None)


def _records(buffer: np.ndarray, dtype: str) -> np.ndarray:
    """Every run of ``buffer``'s bytes as a record of ``dtype``, one starting at each byte (the
    records overlap): indexing it reads or writes whole records at any byte positions."""
    size = np.dtype(dtype).itemsize
    return np.ndarray((len(buffer) - size + 1,), dtype, buffer=buffer, strides=(1,))


def _scattered(lengths: np.ndarray, ends: np.ndarray, data: np.ndarray,
               valid: np.ndarray | None, offsets: bool, counts: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray | None]:
    """``_length_prefixed`` for bodies of a few distinct sizes (names, codes): the lengths and
    the null markers are written at their places in the stream in one copy each, and the
    bodies of each size in one copy (records of that size read where the bodies start and
    written where they go), so no byte is masked. ``counts``: valid elements per body size."""
    sizes = np.diff(ends)
    widths = sizes + 8
    if valid is not None:
        widths[~valid] = 1
    out_ends = _ends(widths)
    out = np.empty(int(out_ends[-1]), np.uint8)
    starts = out_ends[:-1]
    rows = np.arange(len(sizes)) if valid is None else np.flatnonzero(valid)
    if valid is not None:
        out[starts[~valid]] = 0
    if len(rows):
        _records(out, "<u8")[starts[rows]] = lengths[rows]
        # sizes under 2**16: numpy sorts 16-bit integers stably by radix, 7x faster than int64
        by_size = rows[np.argsort(sizes[rows].astype(np.uint16), kind="stable")]
        done = np.cumsum(counts)
        for size in np.flatnonzero(counts[1:]) + 1:
            group = by_size[done[size] - counts[size]:done[size]]
            _records(out, f"V{size}")[starts[group] + 8] = _records(data, f"V{size}")[ends[group]]
    return out, (out_ends if offsets else None)


def _short_prefixed(lengths: np.ndarray, ends: np.ndarray, longest: int, data: np.ndarray,
                    valid: np.ndarray | None, offsets: bool
                    ) -> tuple[np.ndarray, np.ndarray | None]:
    """``_length_prefixed`` for short bodies: one row of 8 + ``longest`` bytes per element,
    filled and read back in row order up to each element's own width. The bodies tile
    ``data[ends[0]:ends[-1]]`` in order, so they fill the grid with one masked copy, or with
    one copy of whole rows when every body is ``longest`` bytes or empty (codes, nulls). The
    rows are records of numpy's (length, bytes) so that each field is copied in one pass
    (a 2-D byte grid copies a few bytes per row, about 10x slower)."""
    n = len(lengths)
    sizes = np.diff(ends)
    fields = [("length", "<u8")] + ([("body", f"V{longest}")] if longest else [])
    rows = np.empty(n, np.dtype(fields))
    rows["length"] = lengths
    grid = rows.view(np.uint8).reshape(n, 8 + longest)
    bodies = data[ends[0]:ends[-1]]
    full = sizes == longest
    if not longest:
        pass
    elif full.all():
        rows["body"] = bodies.view(f"V{longest}")
    elif not sizes[~full].any():
        rows["body"][full] = bodies.view(f"V{longest}")
    else:
        fill = np.ones((n, longest), bool)
        short = np.flatnonzero(~full)
        fill[short] = np.arange(longest) < sizes[short, None]
        grid[:, 8:][fill] = bodies
    widths = sizes + 8
    if valid is not None:
        widths[~valid] = 1
        grid[~valid, 0] = 0
    return _read_rows(grid, widths), (_ends(widths) if offsets else None)


def _encode_list(arr: pa.Array, valid: np.ndarray | None, offsets: bool
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """Each valid list as its length (u64) then its items' encodings (the items' own nulls,
    not the list's, decide which items are null); each null list as the null marker."""
    n = len(arr)
    if pa.types.is_fixed_size_list(arr.type):
        size = arr.type.list_size
        ends = (np.arange(n + 1, dtype=np.int64) + arr.offset) * size
    else:
        ends = _value_offsets(arr)
    first, last = int(ends[0]), int(ends[-1])
    items = arr.values.slice(first, last - first)
    item_data, item_ends = _encode(items, _own_validity(items), offsets=True)
    assert item_ends is not None
    return _length_prefixed(np.diff(ends), item_ends[ends - first], item_data, valid, offsets)

