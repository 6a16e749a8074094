"""Current-ODF slices (schemas/ODF-039-DATA.md): the stored table, its canonical order, the
Parquet file and its hashes.

Generated slices cover every stored type with nulls, ties, NaN and signed zeros, dictionaries,
lists, structs, retractions and correction pairs. The canonical order is checked against a
sort key written here from the documented order, one row at a time in Python; the hash of a
written file against the element-by-element oracle of tests/data/test_arrow_digest.py.
"""
from __future__ import annotations

import base64
import math
import os
import tempfile
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.data.arrow_digest import multihash, record_digest
from coordinator.data.odf_order import sort_keys
from coordinator.data.odf_slice import (
    Op,
    SliceFileError,
    SliceLayoutError,
    build_slice,
    slice_hashes,
    stored_type,
    write_slice,
)
from coordinator.data.parquet_arrow_rs import arrow_rs_schema
from coordinator.metadata.multiformats import Multihash
from coordinator.metadata.odf39.events import OffsetInterval
from tests.data.test_arrow_digest import SCALARS, column, oracle_digest, oracle_elements

SYSTEM_TIME = datetime(2026, 6, 1, 12, 30, 15, 250_000, tzinfo=UTC)
SYSTEM_MS = 1_780_317_015_250

# Parquet cannot store a negative scale (refused, see the refusal tests).
STORABLE = sorted(name for name, (t, _) in SCALARS.items()
                  if not pa.types.is_decimal(t) or t.scale >= 0)
# Event time types the reference takes, with the step between generated values.
EVENT_TIMES = [
    (pa.timestamp("ms", tz="UTC"), 1),
    (pa.timestamp("us"), 1_000),
    (pa.timestamp("ns", tz="+05:30"), 1_000_000),
    (pa.timestamp("s", tz="UTC"), 1),
    (pa.date32(), 1),
    (pa.date64(), 86_400_000),
]
SPECIAL_FLOATS = [math.nan, -0.0, 0.0, math.inf, -math.inf]
SHAPES = ["plain", "dict", "list", "large_list", "fixed_list", "list_of_lists", "struct",
          "nullable_struct"]


def values(draw, type_name: str, rows: int) -> tuple[pa.DataType, list]:
    """``rows`` values drawn from a pool of at most three (ties are the point)."""
    t, item = column(type_name, draw(st.booleans()))
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        item = st.one_of(item, st.sampled_from(SPECIAL_FLOATS))
    pool = draw(st.lists(item, min_size=1, max_size=3))
    return t, [draw(st.sampled_from(pool)) for _ in range(rows)]


def data_column(draw, type_name: str, rows: int) -> pa.Array:
    t, vals = values(draw, type_name, rows)
    shape = draw(st.sampled_from(SHAPES))
    if shape == "dict" and not pa.types.is_boolean(t):
        return pa.array(vals, t).dictionary_encode()
    if shape in ("list", "large_list", "fixed_list", "list_of_lists"):
        size = 2 if shape == "fixed_list" else None
        lists = []
        for _ in range(rows):
            if draw(st.booleans()) and shape != "fixed_list":
                lists.append(None)
                continue
            items = [draw(st.sampled_from(vals or [None])) for _ in range(size or draw(
                st.integers(0, 2)))]
            lists.append([items] if shape == "list_of_lists" else items)
        types = {"list": pa.list_(t), "large_list": pa.large_list(t),
                 "fixed_list": pa.list_(t, 2), "list_of_lists": pa.list_(pa.list_(t))}
        return pa.array(lists, types[shape])
    arr = pa.array(vals, t)
    if shape == "struct":  # never null, its field with nulls of its own
        return pa.StructArray.from_arrays([arr, pa.array(range(rows), pa.int64())], ["v", "n"])
    if shape == "nullable_struct":  # null rows, fields null only there (values hidden under)
        mask = pa.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), pa.bool_())
        filled = pa.array([draw(st.sampled_from([v for v in vals if v is not None] or [None]))
                           if v is None else v for v in vals], t)
        if filled.null_count:
            return arr
        inner = pa.StructArray.from_arrays([filled], ["w"])
        return pa.StructArray.from_arrays([filled, inner], ["v", "s"], mask=mask)
    return arr


@st.composite
def slices(draw) -> tuple[pa.Table, list[list[int]]]:
    """Input data of a slice and its units (one row, or a correct-from/to pair)."""
    kinds = draw(st.lists(st.sampled_from([Op.APPEND, Op.RETRACT, Op.CORRECT_FROM]),
                          max_size=8))
    units = []
    for kind in kinds:
        start = sum(len(u) for u in units)
        units.append([start, start + 1] if kind == Op.CORRECT_FROM else [start])
    rows = sum(len(u) for u in units)
    ops = [op for kind in kinds for op in ([2, 3] if kind == Op.CORRECT_FROM else [int(kind)])]
    et_type, step = draw(st.sampled_from(EVENT_TIMES))
    times = [draw(st.integers(-2, 2)) * step for _ in range(rows)]
    event_time = (pa.array(times, pa.int32()).view(et_type) if pa.types.is_date32(et_type)
                  else pa.array(times, pa.int64()).view(et_type))
    cols: dict[str, pa.Array] = {"event_time": event_time}
    if draw(st.booleans()) or any(op != Op.APPEND for op in ops):
        cols["op"] = pa.array(ops, pa.int8())
    names = draw(st.lists(st.sampled_from(STORABLE), min_size=1, max_size=3))
    for k, name in enumerate(names):
        cols[f"c{k}_{name}"] = data_column(draw, name, rows)
    return pa.table(cols), units


def replay(table: pa.Table, units: list[list[int]], order: list[int], cuts: list[int]
           ) -> pa.Table:
    """The same records, units in another order, cut into chunks at ``cuts``."""
    rows = [r for k in order for r in units[k]]
    shuffled = table.take(pa.array(rows, pa.int64())).combine_chunks()
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    batches = [b for a, z in zip(bounds, bounds[1:], strict=False)
               for b in shuffled.slice(a, z - a).to_batches()]
    return pa.Table.from_batches(batches, schema=shuffled.schema)


def build(table: pa.Table, prev_offset: int | None = None, key: list[str] | None = None
          ) -> pa.Table:
    return build_slice(table, system_time=SYSTEM_TIME, prev_offset=prev_offset, key=key or ())


# --- The oracle of the order -------------------------------------------------------------


def value_key(arr: pa.Array, i: int) -> tuple:
    """A stored value's place in the documented order, computed in Python."""
    t = arr.type
    if not arr[i].is_valid:
        return (0,)
    if isinstance(t, pa.BaseExtensionType):
        return value_key(arr.storage, i)
    if pa.types.is_struct(t):
        return (1, tuple(value_key(arr.field(k), i) for k in range(t.num_fields)))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return (1, oracle_elements(arr.slice(i, 1), None))
    if pa.types.is_floating(t):
        v = float(arr[i].as_py())
        width = t.bit_width // 8
        bits = int.from_bytes(arr.buffers()[1].to_pybytes()[
            (arr.offset + i) * width:(arr.offset + i + 1) * width], "little")
        return (1, 0, bits) if math.isnan(v) else (1, 1, v, bits)
    if pa.types.is_temporal(t):
        return (1, arr.view(pa.int32() if t.bit_width == 32 else pa.int64())[i].as_py())
    v = arr[i].as_py()
    return (1, v.encode() if isinstance(v, str) else v)


def unit_keys(stored: pa.Table, key: list[str] | None = None) -> list[tuple]:
    """The sort key of each unit of a stored slice, in stored order; ``key``: the primary key
    of a merge by key, then the operation type, before it."""
    data = stored.column_names[4:]
    ops = stored["op"].to_pylist()
    keys, i = [], 0
    while i < len(ops):
        partner = i + 1 if ops[i] == Op.CORRECT_FROM else i
        own = tuple(value_key(stored[c].combine_chunks(), i) for c in data)
        after = tuple(value_key(stored[c].combine_chunks(), partner)
                      for c in ["event_time", *data])
        lead = tuple(value_key(stored[c].combine_chunks(), i) for c in key or ())
        keys.append((lead, ops[i] if key else 0,
                     value_key(stored["event_time"].combine_chunks(), i), ops[i], own, after))
        i = partner + 1
    return keys


# --- The order ---------------------------------------------------------------------------


@given(slices())
def test_stored_rows_follow_the_documented_order(generated):
    table, _ = generated
    keys = unit_keys(build(table))
    assert keys == sorted(keys)


@given(slices(), st.data())
def test_a_merge_by_key_stores_rows_by_the_key_then_the_operation_type(generated, data):
    table, _ = generated
    columns = [c for c in table.column_names if c.startswith("c")]
    key = data.draw(st.lists(st.sampled_from(columns), min_size=1, unique=True))
    keys = unit_keys(build(table, key=key), key)
    assert keys == sorted(keys)


@given(slices(), st.randoms(use_true_random=False), st.lists(st.integers(0, 12), max_size=3))
def test_a_replay_in_any_order_and_chunking_stores_the_same_table(generated, rnd, cuts):
    table, units = generated
    order = list(range(len(units)))
    rnd.shuffle(order)
    first, again = build(table), build(replay(table, units, order, cuts))
    assert record_digest(again) == record_digest(first)
    assert again.schema == first.schema


@given(slices())
def test_a_correction_stays_one_pair_with_its_own_values(generated):
    table, units = generated
    stored = build(table)
    ops = stored["op"].to_pylist()
    data = [c for c in table.column_names if c not in ("event_time", "op")]
    pairs_in = sorted(record_digest(build(table.take(pa.array(u, pa.int64()))).select(data))
                      for u in units if len(u) == 2)
    pairs_out = sorted(record_digest(stored.take(pa.array([i, i + 1], pa.int64())).select(data))
                       for i, op in enumerate(ops) if op == Op.CORRECT_FROM)
    assert [op for i, op in enumerate(ops) if i and ops[i - 1] == Op.CORRECT_FROM] == [
        Op.CORRECT_TO] * ops.count(Op.CORRECT_FROM)
    assert pairs_out == pairs_in


def test_equal_floats_are_ordered_by_their_bits_and_nan_comes_first():
    table = pa.table({"event_time": pa.array([0] * 5, pa.timestamp("ms", tz="UTC")),
                      "x": pa.array([1.0, -0.0, None, math.nan, 0.0])})
    stored = build(table)["x"].to_pylist()
    assert stored[0] is None and math.isnan(stored[1])
    assert [math.copysign(1, v) for v in stored[2:4]] == [1, -1] and stored[4] == 1.0


def arrow_sorted(table: pa.Table) -> pa.Table:
    """``table`` (appends only) sorted as the documented order says, by one Arrow sort over
    every column's sort keys (what ``canonical_order`` computed before it refined ties)."""
    keys = [k for name in table.column_names for k in sort_keys(table[name].combine_chunks())]
    names = [str(i) for i in range(len(keys))]
    order = pc.sort_indices(pa.table(keys, names=names),
                            sort_keys=[(k, "ascending", "at_start") for k in names])
    return table.take(order)


def many_rows(seed: int, rows: int) -> pa.Table:
    """Every kind of sort key, few distinct values each (so that ties reach the last
    columns), some over the whole 64-bit range, with nulls, NaN and signed zeros."""
    rng = np.random.default_rng(seed)

    def pick(pool: list, t: pa.DataType) -> pa.Array:
        return pa.array([pool[i] for i in rng.integers(0, len(pool), rows)], t)

    return pa.table({
        "event_time": pick([-2**62, 0, 5, 2**62], pa.timestamp("ms", tz="UTC")),
        "i64": pick([-2**63, None, 2**63 - 1, 0], pa.int64()),
        "u64": pick([0, 2**64 - 1, None], pa.uint64()),
        "f64": pick([math.nan, -0.0, 0.0, None, -math.inf, 1e300, 2.5], pa.float64()),
        "f32": pick([math.nan, -0.0, 0.0, None, 1.5], pa.float32()),
        "s": pick(["", None, "b", "ab", "a"], pa.string()),
        "flag": pick([True, False, None], pa.bool_()),
        "dec": pick([None, 1, -3], pa.decimal128(5, 2)),
        "st": pick([None, {"x": 1, "y": "a"}, {"x": 2, "y": "a"}],
                   pa.struct([("x", pa.int8()), ("y", pa.string())])),
        "l": pick([None, [], [1, None], [1]], pa.list_(pa.int16())),
        "n": pa.array(rng.integers(0, rows // 4, rows), pa.int32()),
    })


@pytest.mark.parametrize("seed", range(4))
def test_many_rows_sort_as_one_arrow_sort_over_the_keys(seed):
    table = many_rows(seed, 3_000)
    stored = build(table).select(table.column_names)
    # rows equal on every key are equal in every hashed byte: the digests compare the orders
    assert record_digest(stored) == record_digest(arrow_sorted(table).cast(stored.schema))


# --- The stored table --------------------------------------------------------------------


@given(slices(), st.one_of(st.none(), st.integers(0, 2**40)))
def test_system_columns_come_first_and_offsets_count_up_from_the_previous(generated, prev):
    table, _ = generated
    stored = build(table, prev)
    start = 0 if prev is None else prev + 1
    assert stored.column_names[:4] == ["offset", "op", "system_time", "event_time"]
    assert stored["offset"].to_pylist() == list(range(start, start + table.num_rows))
    assert set(stored["system_time"].cast(pa.int64()).to_pylist()) <= {SYSTEM_MS}
    assert [(f.type, f.nullable) for f in stored.schema][:3] == [
        (pa.int64(), False), (pa.int32(), False), (pa.timestamp("ms", tz="UTC"), False)]


def test_types_are_normalised_as_the_reference_and_both_readers_need():
    table = pa.table({
        "event_time": pa.array([-1_500, 1_500], pa.timestamp("us", tz="+05:30")),
        "at": pa.array([-1_999_999, 7], pa.timestamp("ns")),
        "day": pa.array([86_400_000, None], pa.date64()),
        "city": pa.array(["Oslo", "Lima"]).dictionary_encode(),
        "tag": pa.array(["a", None], pa.string_view()),
        "nested": pa.array([{"t": 1, "s": 2}, None], pa.struct(
            [("t", pa.timestamp("s")), ("s", pa.time32("s"))])),
    })
    stored = build(table)
    assert stored.schema.field("event_time").type == pa.timestamp("ms", tz="UTC")
    # truncated toward zero, as arrow-rs's cast does
    assert stored["event_time"].cast(pa.int64()).to_pylist() == [-1, 1]
    assert stored["at"].type == pa.timestamp("ms", tz="UTC")
    assert stored["at"].cast(pa.int64()).to_pylist() == [-1, 0]
    assert stored["day"].type == pa.date32()
    assert stored["city"].type == pa.string() and stored["tag"].type == pa.string()
    assert stored["nested"].type == pa.struct([("t", pa.timestamp("ms")),
                                               ("s", pa.time32("ms"))])


def test_a_missing_or_null_event_time_is_the_fallback():
    fallback = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    missing = build_slice(pa.table({"n": [1]}), system_time=SYSTEM_TIME, prev_offset=None,
                          fallback_event_time=fallback)
    assert missing["event_time"].to_pylist() == [fallback]
    dates = pa.table({"event_time": pa.array([None, 3], pa.date32())})
    filled = build_slice(dates, system_time=SYSTEM_TIME, prev_offset=None,
                         fallback_event_time=fallback)
    assert filled["event_time"].cast(pa.int32()).to_pylist() == [3, 20455]


# --- Refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("t", [
    pa.duration("s"), pa.month_day_nano_interval(), pa.null(),
    pa.map_(pa.string(), pa.int32()), pa.list_(pa.struct([("a", pa.int32())])),
    pa.large_list(pa.list_(pa.struct([("a", pa.int32())]))),
    pa.dense_union([pa.field("a", pa.int32())]), pa.list_view(pa.int32()),
    pa.run_end_encoded(pa.int32(), pa.int64()), pa.decimal256(40, -3),
])
def test_types_without_a_stored_form_are_refused_naming_the_column(t):
    with pytest.raises(SliceLayoutError, match="column 'outer.bad': "):
        stored_type(pa.struct([("bad", t)]), "outer", top_level=True)


def test_a_slice_with_a_column_without_a_stored_form_is_refused():
    table = pa.table({"event_time": pa.array([0], pa.date32()),
                      "tags": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32()))})
    with pytest.raises(SliceLayoutError, match="column 'tags': map type"):
        build(table)


def test_a_null_inside_a_struct_with_null_rows_is_refused_naming_the_field():
    inner = pa.array([1, None, 3])
    table = pa.table({"event_time": pa.array([0, 0, 0], pa.date32()),
                      "s": pa.StructArray.from_arrays([inner], ["v"],
                                                      mask=pa.array([True, False, False]))})
    with pytest.raises(SliceLayoutError, match="column 's.v': null where an enclosing struct"):
        build(table)


@pytest.mark.parametrize(("table", "message"), [
    (pa.table({"event_time": pa.array([0], pa.date32()), "offset": [1]}),
     "column 'offset' is a system column"),
    (pa.table({"event_time": pa.array([0], pa.int64())}),
     "event time column 'event_time' is int64; it must be a date or a timestamp"),
    (pa.table({"n": [1]}), "the data has no event time column 'event_time'"),
    (pa.table({"event_time": pa.array([None], pa.date32())}),
     "event time column 'event_time' has 1 nulls"),
    (pa.table({"event_time": pa.array([0, 0], pa.date32()), "op": [0, 7]}),
     "operation type column 'op', row 1: 7 is no operation type"),
    (pa.table({"event_time": pa.array([0, 0], pa.date32()), "op": [2, 0]}),
     "operation type column 'op', row 0: a correct-from row must be immediately followed"),
    (pa.table({"event_time": pa.array([0, 0], pa.date32()), "op": [0, 3]}),
     "operation type column 'op', row 1: a correct-from row"),
])
def test_data_that_is_no_slice_is_refused(table, message):
    with pytest.raises(SliceLayoutError, match=message):
        build(table)


# --- The file and its hashes -------------------------------------------------------------


@given(slices(), st.one_of(st.none(), st.integers(0, 2**40)))
def test_a_written_slice_hashes_as_the_oracle_over_its_table(generated, prev):
    table, _ = generated
    stored = build(table, prev)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "slice.parquet")
        written = write_slice(stored, path)
        hashes = slice_hashes(path)
        f = pq.ParquetFile(path)
        assert arrow_rs_schema(f) == f.schema_arrow  # both readers read the same types
        assert f.read().schema == stored.schema
        with open(path, "rb") as raw:
            body = raw.read()
    assert hashes.logical.to_bytes() == multihash(oracle_digest(stored.schema, stored.to_batches()))
    assert hashes.physical == Multihash.sha3_256(body)
    assert str(hashes.physical).startswith("f1620")
    assert str(hashes.logical).startswith("f9680c00120")
    assert hashes.size == len(body) and hashes.num_records == table.num_rows
    start = 0 if prev is None else prev + 1
    assert hashes.offsets == (OffsetInterval(start=start, end=start + table.num_rows - 1)
                              if table.num_rows else None)
    assert written == hashes  # computed while writing, the same as read back


def test_the_file_is_written_with_the_reference_writer_settings(tmp_path):
    rows = 30_000
    table = pa.table({"event_time": pa.array(np.arange(rows), pa.timestamp("ms", tz="UTC")),
                      "n": pa.array(np.arange(rows) % 7)})
    path = tmp_path / "slice.parquet"
    write_slice(build(table), path)
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(0).column(0)
    assert meta.format_version == "2.6" and b"ARROW:schema" in meta.metadata
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {
        "SNAPPY"}
    assert chunk.statistics.min == 0 and chunk.statistics.max == rows - 1
    assert chunk.has_column_index and chunk.has_offset_index


def test_a_file_whose_offsets_are_not_one_per_record_is_refused(tmp_path):
    path = tmp_path / "slice.parquet"
    pq.write_table(pa.table({"offset": pa.array([0, 2], pa.int64())}), path)
    with pytest.raises(SliceFileError, match="offsets 0 to 2 for 2 records"):
        slice_hashes(path)


def with_hint(tmp_path, arr: pa.Array, hint: pa.DataType):
    """A slice file whose embedded Arrow schema says ``hint`` over ``arr``'s Parquet column,
    as another writer (arrow-rs) may leave it."""
    path = tmp_path / "hinted.parquet"
    table = pa.table({"offset": pa.array(range(len(arr)), pa.int64()), "c": arr})
    writer = pq.ParquetWriter(path, table.schema, store_schema=False)
    writer.write_table(table)
    writer.add_key_value_metadata({"ARROW:schema": base64.b64encode(
        pa.schema([("offset", pa.int64()), ("c", hint)]).serialize().to_pybytes())})
    writer.close()
    return path


@pytest.mark.parametrize(("arr", "hint", "arrow_rs"), [
    (pa.array([1, None], pa.date32()), pa.date64(), pa.date64()),
    (pa.array([86_400_000], pa.int64()), pa.date64(), pa.date64()),
    (pa.array([5], pa.int64()), pa.timestamp("s", tz="UTC"), pa.timestamp("s", tz="UTC")),
    (pa.array([5], pa.int32()), pa.time32("s"), pa.time32("s")),
    (pa.array([5], pa.timestamp("ms")), pa.timestamp("ms", tz="+00:00"),
     pa.timestamp("ms", tz="+00:00")),
    (pa.array([5], pa.timestamp("ms", tz="UTC")), pa.timestamp("ms"),
     pa.timestamp("ms", tz="UTC")),
    (pa.array([5], pa.timestamp("ms", tz="UTC")), pa.timestamp("s", tz="UTC"),
     pa.timestamp("ms", tz="UTC")),
    (pa.array([b"x"]), pa.string(), pa.string()),
    (pa.array([1], pa.decimal128(5, 2)), pa.decimal256(5, 2), pa.decimal256(5, 2)),
])
def test_a_file_is_hashed_with_the_types_arrow_rs_reads(tmp_path, arr, hint, arrow_rs):
    path = with_hint(tmp_path, arr, hint)
    f = pq.ParquetFile(path)
    assert arrow_rs_schema(f).field("c").type == arrow_rs
    expected = f.read().cast(pa.schema([("offset", pa.int64()), ("c", arrow_rs)]))
    assert slice_hashes(path).logical.to_bytes() == multihash(oracle_digest(expected.schema,
                                                                  expected.to_batches()))


def test_a_date64_column_pyarrow_wrote_hashes_as_arrow_rs_reads_it(tmp_path):
    """pyarrow stores Date64 as DATE with a Date64 hint and reads it back as Date32; arrow-rs
    follows the hint, at any depth."""
    table = pa.table({
        "offset": pa.array([0, 1], pa.int64()),
        "s": pa.array([{"d": 86_400_000, "l": [0, 86_400_000]}, None],
                      pa.struct([("d", pa.date64()), ("l", pa.list_(pa.date64()))])),
    })
    path = tmp_path / "date64.parquet"
    pq.write_table(table, path)
    assert pq.read_table(path)["s"].type.field("d").type == pa.date32()
    assert slice_hashes(path).logical.to_bytes() == multihash(oracle_digest(table.schema,
                                                                  table.to_batches()))


def test_a_null_two_struct_levels_down_is_refused_naming_the_field():
    leaf = pa.array([1, 2, None])
    inner = pa.StructArray.from_arrays([leaf], ["v"])
    outer = pa.StructArray.from_arrays([inner], ["s"], mask=pa.array([True, False, False]))
    table = pa.table({"event_time": pa.array([0, 0, 0], pa.date32()), "o": outer})
    with pytest.raises(SliceLayoutError, match="column 'o.s.v': null where an enclosing"):
        build(table)


def test_a_struct_whose_fields_are_null_only_with_it_is_stored():
    leaf = pa.array([7, 2, 3])  # 7 sits under the null row and is not stored
    table = pa.table({"event_time": pa.array([0, 0, 0], pa.date32()),
                      "s": pa.StructArray.from_arrays([leaf], ["v"],
                                                      mask=pa.array([True, False, False]))})
    assert build(table)["s"].to_pylist() == [None, {"v": 2}, {"v": 3}]
