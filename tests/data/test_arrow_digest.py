"""arrow0-sha3-256 (schemas/ARROW-DIGEST.md) against the reference's vectors and a slow oracle.

The oracle below follows the algorithm one element at a time in plain Python: values come from
``as_py`` (temporal values from their stored integers) and are packed with ``struct`` and
``int.to_bytes``; only a slot that is null in its own array yet counts as valid (the reference's
way of combining struct validities) is read from the raw buffers, as the reference does.
"""
from __future__ import annotations

import hashlib
import struct
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.data.arrow_digest import (
    RecordDigest,
    UnsupportedTypeError,
    array_digest,
    file_digest,
    multibase16,
    multihash,
    record_digest,
)
from coordinator.errors import Invalid

# --- The oracle -------------------------------------------------------------------------

TAGS = {"int": 1, "float": 2, "binary": 3, "utf8": 4, "bool": 5, "decimal": 6, "date": 7,
        "time": 8, "timestamp": 9, "list": 11}
UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def u64(n: int) -> bytes:
    return n.to_bytes(8, "little")


def u16(n: int) -> bytes:
    return n.to_bytes(2, "little")


def oracle_header(t: pa.DataType) -> bytes:
    if pa.types.is_dictionary(t):
        return oracle_header(t.value_type)
    if pa.types.is_boolean(t):
        return u16(TAGS["bool"])
    if pa.types.is_integer(t):
        return u16(TAGS["int"]) + (b"\x01" if pa.types.is_signed_integer(t) else b"\x00") \
            + u64(t.bit_width)
    if pa.types.is_floating(t):
        return u16(TAGS["float"]) + u64(t.bit_width)
    if pa.types.is_timestamp(t):
        tz = b"\x00" if t.tz is None else u64(len(t.tz)) + t.tz.encode()
        return u16(TAGS["timestamp"]) + u16(UNITS[t.unit]) + tz
    if pa.types.is_date32(t):
        return u16(TAGS["date"]) + u64(32) + u16(0)
    if pa.types.is_date64(t):
        return u16(TAGS["date"]) + u64(64) + u16(1)
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return u16(TAGS["time"]) + u64(t.bit_width) + u16(UNITS[t.unit])
    if pa.types.is_decimal(t):
        return u16(TAGS["decimal"]) + u64(t.bit_width) + u64(t.precision) \
            + t.scale.to_bytes(8, "little", signed=True)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return u16(TAGS["binary"])
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return u16(TAGS["utf8"])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return u16(TAGS["list"]) + oracle_header(t.value_type)
    raise AssertionError(f"oracle has no header for {t}")


def own_valid(arr: pa.Array) -> list[bool] | None:
    return [arr[i].is_valid for i in range(len(arr))] if arr.null_count else None


def combine(parent: list[bool] | None, own: list[bool] | None) -> list[bool] | None:
    """The reference's rule: OR when both have nulls, the one that has nulls, else none."""
    parent_has = parent is not None and not all(parent)
    if parent is None:
        return own
    if own is None:
        return parent if parent_has else None
    return [p or o for p, o in zip(parent, own, strict=True)] if parent_has else None


def oracle_elements(arr: pa.Array, valid: list[bool] | None) -> bytes:
    out = b""
    for i in range(len(arr)):
        if valid is not None and not valid[i]:
            out += b"\x00"
        elif not arr[i].is_valid:
            out += raw_slot(arr, i)  # null in its array, valid for the reference
        else:
            out += oracle_value(arr, i)
    return out


def oracle_value(arr: pa.Array, i: int) -> bytes:
    t = arr.type
    if pa.types.is_temporal(t):
        stored = arr.view(pa.int32() if t.bit_width == 32 else pa.int64())[i].as_py()
        return stored.to_bytes(t.bit_width // 8, "little", signed=True)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        items = arr[i].values  # its length, then its items by their own nulls
        return u64(len(items)) + oracle_elements(items, own_valid(items))
    v = arr[i].as_py()
    if pa.types.is_boolean(t):
        return b"\x02" if v else b"\x01"
    if pa.types.is_integer(t):
        return v.to_bytes(t.bit_width // 8, "little", signed=pa.types.is_signed_integer(t))
    if pa.types.is_floating(t):
        return struct.pack({16: "<e", 32: "<f", 64: "<d"}[t.bit_width], v)
    if pa.types.is_decimal(t):
        return int(v.scaleb(t.scale)).to_bytes(t.bit_width // 8, "little", signed=True)
    if pa.types.is_fixed_size_binary(t):
        return u64(t.byte_width) + v
    if isinstance(v, str):
        v = v.encode()
    return u64(len(v)) + v


def raw_slot(arr: pa.Array, i: int) -> bytes:
    t = arr.type
    j = arr.offset + i
    data = arr.buffers()[1].to_pybytes()
    if pa.types.is_boolean(t):
        return b"\x02" if data[j // 8] >> (j % 8) & 1 else b"\x01"
    if pa.types.is_fixed_size_binary(t):
        return u64(t.byte_width) + data[j * t.byte_width:(j + 1) * t.byte_width]
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        start, end = struct.unpack_from("<qq", data, 8 * j)
    elif pa.types.is_string(t) or pa.types.is_binary(t):
        start, end = struct.unpack_from("<ii", data, 4 * j)
    else:
        width = t.bit_width // 8
        return data[j * width:(j + 1) * width]
    return u64(end - start) + arr.buffers()[2].to_pybytes()[start:end]


def oracle_digest(schema: pa.Schema, batches: list[pa.RecordBatch]) -> bytes:
    record = hashlib.sha3_256()
    leaves: list[tuple[tuple[int, ...], pa.DataType]] = []

    def walk(fields, path, level):
        for k, f in enumerate(fields):
            record.update(u64(len(f.name.encode())) + f.name.encode() + u64(level))
            if pa.types.is_struct(f.type):
                walk(list(f.type), path + (k,), level + 1)
            else:
                leaves.append((path + (k,), f.type))

    walk(list(schema), (), 0)
    columns = [hashlib.sha3_256(oracle_header(t)) for _, t in leaves]
    for batch in batches:
        for column, (path, _) in zip(columns, leaves, strict=True):
            arr, parent = batch.column(path[0]), None
            for k in path[1:]:
                parent = combine(parent, own_valid(arr))
                arr = arr.field(k)
            if pa.types.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            column.update(oracle_elements(arr, combine(parent, own_valid(arr))))
    for column in columns:
        record.update(column.digest())
    return record.digest()


# --- The reference's vectors ------------------------------------------------------------


def test_reproduces_kamu_query_result_hash():
    """kamu-cli tests/tests_http (test_data_query_handler_full) and the kamu docs: the
    ``resultHash`` of ``select offset, city, population ... order by offset desc``."""
    table = pa.table({
        "offset": pa.array([1, 0], pa.int64()),
        "city": pa.array(["B", "A"], pa.string()),
        "population": pa.array([200, 100], pa.uint64()),
    })
    assert multibase16(record_digest(table)) == (
        "f9680c001200b3483eecc3d5c6b50ee6b8cba11b51c08f89ea1f53d3a334c743199f5fe656e"
    )


def test_multihash_is_the_codec_varint_then_length_then_digest():
    assert multihash(bytes(32))[:5] == bytes.fromhex("9680c00120")


def int32s(values) -> pa.Array:
    return pa.array(values, pa.int32())


def test_array_digest_matches_reference_relations_for_ints():
    """arrow-digest src/array_digest.rs test_ints, test_int_array."""
    assert array_digest(int32s([1, 2, 3])) == array_digest(int32s([1, 2, 3]))
    assert array_digest(int32s([1, 2, 3])) != array_digest(int32s([1, 2, None, 3]))
    assert array_digest(int32s([1, 2, 3])) != array_digest(pa.array([1, 2, 3], pa.uint32()))


def bools(data: int, length: int, validity: int | None = None) -> pa.Array:
    buffers = [None if validity is None else pa.py_buffer(bytes([validity])),
               pa.py_buffer(bytes([data]))]
    return pa.Array.from_buffers(pa.bool_(), length, buffers)


def test_array_digest_matches_reference_relations_for_booleans():
    """arrow-digest src/array_digest.rs test_bool_array: bits past the length do not count."""
    first = bools(0b0011_0101, 6)
    assert array_digest(first) == array_digest(pa.array([True, False, True, False, True, True]))
    assert array_digest(first) != array_digest(pa.array([True, False, True, False, True, False]))
    assert array_digest(first) != array_digest(pa.array([False, False, True, False, True, True]))
    assert array_digest(first) == array_digest(bools(0b1111_0101, 6))
    assert array_digest(bools(0b1111_0101, 6, 0b1110_1110)) == array_digest(
        pa.array([None, False, True, False, None, True]))


def test_array_digest_matches_reference_relations_for_strings():
    """arrow-digest src/array_digest.rs test_string_array."""
    words = ["foo", "bar", "baz"]
    assert array_digest(pa.array(words)) == array_digest(pa.array(words, pa.large_string()))
    assert array_digest(pa.array(words)) == array_digest(pa.array(words, pa.string_view()))
    assert array_digest(pa.array(words)) != array_digest(pa.array(["foo", "bar", "", "baz"]))
    assert array_digest(pa.array(words)) != array_digest(pa.array(["foo", "bar", None, "baz"]))


def test_array_digest_matches_reference_relations_for_lists():
    """arrow-digest src/array_digest.rs test_list_array: a value sliding to the next list."""
    lists = [[0, 1, 2], None, [3, None, 4, 5], [6, 7]]
    digest = array_digest(pa.array(lists, pa.list_(pa.int32())))
    assert digest == array_digest(pa.array(lists, pa.list_(pa.int32())))
    assert digest != array_digest(
        pa.array([[0, 1, 2], None, [3, None, 4, 100], [6, 7]], pa.list_(pa.int32())))
    assert digest != array_digest(
        pa.array([[0, 1, 2], None, [3, None, 4], [5, 6, 7]], pa.list_(pa.int32())))


def test_array_digest_matches_reference_relations_for_binaries():
    """arrow-digest src/array_digest.rs test_binary_array: fixed-size binary hashes like
    binary, with a length before every value."""
    values = [b"one", b"two", b"", b"three"]
    assert array_digest(pa.array(values)) != array_digest(pa.array([b"one", b"two", b"three"]))
    assert array_digest(pa.array(values)) != array_digest(
        pa.array([b"one", b"two", None, b"three"]))
    assert array_digest(pa.array([b"one", b"two"])) == array_digest(
        pa.array([b"one", b"two"], pa.binary(3)))
    assert array_digest(pa.array(values)) == array_digest(pa.array(values, pa.binary_view()))


def test_record_digest_matches_reference_relations_for_structs():
    """arrow-digest src/record_digest.rs test_batch_nested: names count; a nullable flag alone
    does not; a null struct row does."""
    c, d = pa.array(["a", "b", "c"]), pa.array([3, 2, 1], pa.int32())
    a = pa.array([1, 2, 3], pa.int32())
    inner = pa.StructArray.from_arrays([c, d], ["c", "d"])
    base = record_digest(pa.table({"a": a, "b": inner}))
    assert base != record_digest(pa.table({"a": a, "bee": inner}))
    nullable = pa.schema([("a", pa.int32(), False), ("b", inner.type, True)])
    assert base == record_digest(pa.table({"a": a, "b": inner}, schema=nullable))
    with_null = pa.StructArray.from_arrays([c, d], ["c", "d"],
                                           mask=pa.array([False, True, False]))
    assert base != record_digest(pa.table({"a": a, "b": with_null}))


# --- The fast code against the oracle ---------------------------------------------------

SCALARS = {
    "i8": (pa.int8(), st.integers(-2**7, 2**7 - 1)),
    "u16": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "i32": (pa.int32(), st.integers(-2**31, 2**31 - 1)),
    "u64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "f16": (pa.float16(), st.sampled_from([0.0, -1.5, 65504.0, 0.099975586])),
    "f32": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "f64": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "str": (pa.string(), st.text(max_size=6)),
    "lstr": (pa.large_string(), st.text(max_size=6)),
    "text": (pa.string(), st.text(max_size=40)),  # long enough for both layouts
    "bin": (pa.binary(), st.binary(max_size=6)),
    "fbin": (pa.binary(3), st.binary(min_size=3, max_size=3)),
    "date32": (pa.date32(), st.dates()),
    "date64": (pa.date64(), st.dates()),
    "time32": (pa.time32("ms"), st.times()),
    "time64": (pa.time64("ns"), st.times()),
    "ts_ns": (pa.timestamp("ns"), st.integers(-2**62, 2**62)),
    "ts_us_utc": (pa.timestamp("us", tz="UTC"), st.integers(-2**50, 2**50)),
    "ts_s_tz": (pa.timestamp("s", tz="+05:30"), st.integers(-2**40, 2**40)),
    "dec128": (pa.decimal128(9, 2), st.decimals(-10**6, 10**6, places=2)),
    "dec256": (pa.decimal256(40, -3), st.integers(-10**30, 10**30).map(
        lambda n: Decimal(n).scaleb(3))),
}


def column(type_name: str, nulls: bool):
    t, values = SCALARS[type_name]
    if pa.types.is_float16(t):
        values = values.map(np.float16)
    if pa.types.is_time32(t):
        values = values.map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000))
    item = st.one_of(st.none(), values) if nulls else values
    return t, item


@st.composite
def tables(draw) -> pa.Table:
    """Tables of every supported type: nulls, dictionaries, lists, nested structs with nulls."""
    rows = draw(st.integers(0, 12))
    names = draw(st.lists(st.sampled_from(sorted(SCALARS)), min_size=1, max_size=4))
    cols: dict[str, pa.Array] = {}
    for k, name in enumerate(names):
        t, item = column(name, draw(st.booleans()))
        arr = pa.array(draw(st.lists(item, min_size=rows, max_size=rows)), t)
        shape = draw(st.sampled_from(["plain", "dict", "list", "large_list", "fixed_list",
                                      "list_of_lists", "struct"]))
        if shape == "dict" and not pa.types.is_boolean(t):
            arr = arr.dictionary_encode()
        elif shape in ("list", "large_list", "fixed_list"):
            size = 2 if shape == "fixed_list" else None
            lists = [draw(st.one_of(st.none(), st.lists(item, min_size=size or 0,
                                                         max_size=size or 3)))
                     for _ in range(rows)]
            arr = pa.array(lists, pa.large_list(t) if shape == "large_list"
                           else pa.list_(t, size or -1))
        elif shape == "list_of_lists":
            inner_lists = st.one_of(st.none(), st.lists(item, max_size=2))
            lists = [draw(st.one_of(st.none(), st.lists(inner_lists, max_size=2)))
                     for _ in range(rows)]
            arr = pa.array(lists, pa.list_(pa.list_(t)))
        elif shape == "struct":
            outer = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
            inner = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
            leaf = pa.StructArray.from_arrays([arr], ["v"], mask=pa.array(inner, pa.bool_()))
            arr = pa.StructArray.from_arrays([leaf, arr], ["s", "w"],
                                             mask=pa.array(outer, pa.bool_()))
        cols[f"c{k}_{name}"] = arr
    return pa.table(cols)


def split(table: pa.Table, cuts: list[int]) -> list[pa.RecordBatch]:
    """The table as batches cut at ``cuts``: slices of its arrays (non-zero offsets)."""
    whole = pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns],
                                       schema=table.schema)
    bounds = [0, *sorted(min(c, table.num_rows) for c in cuts), table.num_rows]
    return [whole.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@given(tables(), st.lists(st.integers(0, 12), max_size=3))
def test_fast_digest_equals_oracle_on_generated_tables(table, cuts):
    batches = split(table, cuts)
    d = RecordDigest(table.schema)
    for batch in batches:
        d.update(batch)
    assert d.finish() == oracle_digest(table.schema, batches)


@given(tables(), st.lists(st.integers(0, 12), max_size=3))
def test_parallel_columns_give_the_same_digest(table, cuts):
    with ThreadPoolExecutor(2) as pool:
        d = RecordDigest(table.schema, pool)
        for batch in split(table, cuts):
            d.update(batch)
    assert d.finish() == oracle_digest(table.schema, split(table, cuts))


def test_batching_and_slicing_do_not_change_the_digest():
    table = pa.table({"n": pa.array(range(100), pa.int64()),
                      "s": pa.array([None if i % 7 == 0 else str(i) for i in range(100)]),
                      "b": pa.array([i % 3 == 0 for i in range(100)])})
    whole = record_digest(table)
    for cuts in ([1], [13, 50], [3, 4, 5, 99]):
        d = RecordDigest(table.schema)
        for batch in split(table, cuts):
            d.update(batch)
        assert d.finish() == whole


def test_a_batch_longer_than_a_slice_keeps_the_batch_null_rule():
    """Long batches are encoded a slice at a time (64K rows), but whether a struct level has
    nulls is asked of the whole batch: here the inner struct's nulls are all in the first
    slice, the outer's all in the second, so for the batch they OR to all valid and hide the
    leaf's nulls; a slice on its own would not hide them."""
    rows, cut = 70_000, 1 << 16
    i = np.arange(rows)
    leaf = pa.array(i, mask=(i < cut) & (i % 4 == 0))
    inner = pa.StructArray.from_arrays([leaf], ["v"], mask=pa.array((i < cut) & (i % 4 == 0)))
    outer = pa.StructArray.from_arrays([inner], ["s"], mask=pa.array((i >= cut) & (i % 2 == 1)))
    table = pa.table({"o": outer})
    assert record_digest(table) == oracle_digest(table.schema, table.to_batches())


@pytest.mark.parametrize("sizes", [
    range(3, 16),  # a few distinct sizes: each size's bodies copied at once
    range(30, 71),  # many, of similar size: a padded grid of rows
    range(0, 41),  # many, widely varying: joined by Arrow
    [2, 70_000],  # a body too long to scatter by size
], ids=["few sizes", "many similar sizes", "many varied sizes", "a long body"])
def test_each_way_of_laying_out_length_prefixed_bodies_matches_the_oracle(sizes):
    rng = np.random.default_rng(5)
    sizes = list(sizes)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = [None if i % 9 == 4 else "".join(rng.choice(letters, sizes[i % len(sizes)]))
             for i in range(3 * len(sizes))]
    rng.shuffle(words)
    strings = pa.array(words)
    lists = pa.array([None if w is None else list(range(len(w) % 7)) for w in words],
                     pa.list_(pa.int64()))
    table = pa.table({"s": strings, "b": strings.cast(pa.binary()), "l": lists})
    assert record_digest(table) == oracle_digest(table.schema, table.to_batches())


def test_dictionary_columns_hash_as_their_values():
    plain = pa.table({"city": ["Oslo", None, "Lima", "Oslo"]})
    encoded = pa.table({"city": plain["city"].dictionary_encode()})
    assert record_digest(encoded) == record_digest(plain)


def test_reordering_rows_changes_the_digest():
    """The digest is order dependent: the same rows in another order hash differently."""
    table = pa.table({"n": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]})
    assert record_digest(table) != record_digest(table.take([2, 0, 1]))


# --- Files and refusals -----------------------------------------------------------------


def test_file_digest_equals_digest_of_its_rows(tmp_path):
    rows = 300_000
    rng = np.random.default_rng(7)
    table = pa.table({
        "t": pa.array(np.arange(rows) * 1000, pa.timestamp("us", tz="UTC")),
        "n": pa.array(rng.integers(-50, 50, rows), pa.int32()),
        "x": pa.array(np.where(rng.random(rows) < 0.1, np.nan, rng.random(rows))),
        "s": pa.array(rng.choice(["SFO", "LAX", None, "Chicago O'Hare"], rows)),
    })
    path = tmp_path / "slice.parquet"
    pq.write_table(table, path, row_group_size=70_000)
    assert file_digest(path) == file_digest(path, threads=1) == record_digest(table)


@pytest.mark.parametrize("t", [pa.duration("s"), pa.month_day_nano_interval(), pa.null(),
                               pa.map_(pa.string(), pa.int32()),
                               pa.list_(pa.struct([("a", pa.int32())])),
                               pa.dense_union([pa.field("a", pa.int32())])])
def test_types_the_reference_cannot_hash_are_refused_naming_the_column(t):
    with pytest.raises(UnsupportedTypeError, match="column 'outer.bad': type"):
        RecordDigest(pa.schema([("ok", pa.int32()),
                                ("outer", pa.struct([("bad", t)]))]))


def test_a_batch_of_another_schema_is_refused():
    d = RecordDigest(pa.schema([("n", pa.int64())]))
    with pytest.raises(Invalid, match="columns n: int32 does not match the digest's columns n: int64"):
        d.update(pa.table({"n": pa.array([1], pa.int32())}))


def test_empty_data_hashes_the_headers_only():
    schema = pa.schema([("when", pa.date32())])
    expected = hashlib.sha3_256(
        u64(4) + b"when" + u64(0) + hashlib.sha3_256(u16(7) + u64(32) + u16(0)).digest()
    ).digest()
    assert record_digest(schema.empty_table()) == expected
    assert RecordDigest(schema).finish() == expected



def test_struct_validity_combines_as_the_reference_does():
    """Validities combine by OR; a parent combined to all-valid hides a child's own nulls, so
    the leaf's null slot is hashed from its stored bytes (zero here), not as a null marker."""
    leaf = pa.array([None, 7], pa.int32())
    inner = pa.StructArray.from_arrays([leaf], ["v"], mask=pa.array([True, False]))
    outer = pa.StructArray.from_arrays([inner], ["s"], mask=pa.array([False, True]))
    header = u64(1) + b"o" + u64(0) + u64(1) + b"s" + u64(1) + u64(1) + b"v" + u64(2)
    column = hashlib.sha3_256(u16(1) + b"\x01" + u64(32) + bytes(4) + (7).to_bytes(4, "little"))
    expected = hashlib.sha3_256(header + column.digest()).digest()
    assert leaf.buffers()[1].to_pybytes()[:4] == bytes(4)
    assert record_digest(pa.table({"o": outer})) == expected
