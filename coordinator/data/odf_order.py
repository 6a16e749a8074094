"""The canonical record order of a current-ODF slice (``schemas/ODF-039-DATA.md``, "Order").

arrow-digest V0 depends on row order, so the coordinator stores every slice in one order that
depends only on the records: a replay of the same records, in any order and any chunking,
sorts to the same table and so hashes the same.

Invariants:

- Records are ordered by the event time, then the operation type, then every data column in
  stored order; a root merged by primary key (snapshot, changelog and upsert streams) orders
  them by that key's columns, then the operation type, then the event time and the other
  data columns, as the reference's merge strategies sort them (``sort_order``: the key, then
  the operation type; the reference leaves ties in any order, coord breaks them so). Each
  column by its typed value: nulls first; floats by value with NaN before every
  number, and equal values (0.0 and -0.0, NaN payloads) by their bits; strings and binaries by
  their bytes; booleans false first; a struct by whether it is null, then its fields in order
  (a null struct's fields count as null); a list by its arrow-digest encoding (a total order,
  not a natural one: its length first, little-endian).
- Records that compare equal on all of these are equal in every byte the hash reads, so how
  ties are broken cannot show.
- A correct-from record and the correct-to record after it move as one unit, placed by the
  correct-from record's event time, operation type and values, then the correct-to record's
  event time and values (every other record counts as its own partner here).
- The order is that of one Arrow ``sort_indices`` over every column's ``sort_keys`` (nulls at
  start), computed by refining ties: the key arrays' unsigned ordinals, their bits
  concatenated most significant first, sorted with numpy only among the units still tied,
  as many bits per pass as fit (the first pass: one key array); while most units stay tied
  pass after pass (repeated records), the bits left are sorted in one Arrow sort instead.
  A key array equal in every unit is left out. Python loops over key arrays and passes,
  never over rows; when the rows already are in order, nothing is sorted. Units in different
  tie groups never trade places, so a pass sorts parts of whole groups in parallel threads.
"""
from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import PARALLEL_ROWS, THREADS, arrow_of, validity
from .arrow_digest import element_bytes

__all__ = ["canonical_order", "sort_keys"]

_CORRECT_FROM, _CORRECT_TO = 2, 3  # odf_slice.Op (which imports this module)
_UNSIGNED = {16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}
T = TypeVar("T")


def canonical_order(table: pa.Table, ops: np.ndarray, event_time: str,
                    key: Sequence[str] = ()) -> np.ndarray:
    """Row indices of ``table`` (the event time and data columns, types as stored) in
    canonical order, given the rows' operation types; correct-from/to pairs must be adjacent.
    ``key``: the primary key of a root merged by key, which leads the order (module doc)."""
    n = table.num_rows
    if not n:
        return np.zeros(0, np.int64)
    leaders = np.flatnonzero(ops != _CORRECT_TO)
    pairs = ops[leaders] == _CORRECT_FROM
    data = [c for c in table.column_names if c != event_time]
    rows = None if len(leaders) == n else leaders

    def keys_of(names: list[str], rows: np.ndarray | None) -> list[_Key]:
        return [_Key(table[name], rows) for name in names]

    by_op = [_Key(arrow_of(ops[leaders]), None)] if ops.min() != ops.max() else []
    if key:
        keys = [*keys_of(list(key), rows), *by_op, *keys_of([event_time], rows),
                *keys_of([c for c in data if c not in key], rows)]
    else:
        keys = [*keys_of([event_time], rows), *by_op, *keys_of(data, rows)]
    if pairs.any():
        # then the correct-to record's event time and values
        keys.extend(keys_of([event_time, *data], leaders + pairs))
    first = _lexicographic(len(leaders), keys)
    if rows is not None:
        first = leaders[first]
    if not pairs.any():
        return first
    sizes = 1 + (ops[first] == _CORRECT_FROM)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(first, sizes) + (np.arange(n) - starts)


@dataclass(frozen=True)
class _Key:
    """A column whose sort keys order the units: unit ``i`` is row ``rows[i]`` of it (row
    ``i`` when ``rows`` is None)."""

    column: pa.ChunkedArray | pa.Array
    rows: np.ndarray | None

    def ordinals(self, units: np.ndarray | None) -> list[tuple[np.ndarray, int]]:
        """The ordinals of the column's sort key arrays for the given units (all, in order,
        when None), most significant first, with their widths in bits (``_ordinal``),
        less those equal for every unit of the column."""
        if units is None:
            rows = self.rows
        else:
            rows = units if self.rows is None else self.rows[units]
        column = self.column
        if isinstance(column, pa.ChunkedArray):  # one chunk as build_slice gives: no copy
            column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        if rows is None:
            found = _ordinals(column)
        elif 4 * len(rows) >= len(column):  # most rows: cheaper to pick ordinals than values
            found = [(o[rows], bits) for o, bits in _ordinals(column)]
        else:
            found = _ordinals(column.take(arrow_of(rows)))
        return [(o, bits) for o, bits in found if bits]  # a key equal everywhere orders nothing


def _lexicographic(n: int, keys: list[_Key]) -> np.ndarray:
    """The permutation of ``n`` units that sorts them by the keys' arrays, most significant
    first (units tied on all of them in any order).

    Ties are refined pass after pass, each sorting only the units still tied with a
    neighbour: by the next bits of the key arrays' ordinals (unsigned integers in the
    array's order), concatenated, packed with the units' tie group and position into one
    uint64 each, which numpy sorts with SIMD (radix digits, most significant first). Units
    the first keys set apart (usually almost all) cost nothing in the later ones; when a pass
    leaves most of its units tied, ``_sort_rest`` sorts by all the rest at once."""
    order = np.arange(n)
    active = order.copy()  # positions in ``order`` still tied with a neighbour
    group = np.zeros(n, np.uint64)  # their tie group, nondecreasing along the positions
    moved = False  # whether ``order`` or ``active`` changed (else units are rows as they are)
    later = iter(keys)
    # ordinals not sorted by yet, of the active units in their current order
    pending: list[tuple[np.ndarray, int]] = []
    passes = 0
    while True:
        # As many ordinal bits as fit beside the group and position, high bits first: a
        # pass costs about what computing a key's ordinals does. The first pass sorts by one
        # key array only: in most data it sets nearly all units apart, and then the later
        # keys' ordinals are computed for the few units left.
        room = 64 - int(group[-1]).bit_length() - (len(active) - 1).bit_length()
        ordinal, bits = None, 0
        while bits < room and not (passes == 0 and bits):
            if not pending:
                key = next(later, None)
                if key is None:
                    break
                pending = key.ordinals(order[active] if moved else None)
                continue
            more, width = pending[0]
            rest = max(width - (room - bits), 0)
            if rest:  # its high bits now, the rest next
                pending[0] = (more & np.uint64((1 << rest) - 1), rest)
                more = more >> np.uint64(rest)
            else:
                pending.pop(0)
            ordinal = more if ordinal is None else (ordinal << np.uint64(width - rest)) | more
            bits += width - rest
        if ordinal is None:
            return order
        passes += 1
        before = len(active)
        perm, compound = _sort_within(group, ordinal, bits)
        if perm is not None:
            order[active] = order[active][perm]
            pending = [(o[perm], b) for o, b in pending]
            moved = True
        change = np.empty(len(active), bool)
        change[0] = True
        np.not_equal(compound[1:], compound[:-1], out=change[1:])
        tied = ~(change & np.append(change[1:], True))
        if not tied.all():
            active = active[tied]
            if not len(active):
                return order
            pending = [(o[tied], b) for o, b in pending]
            moved = True
        group = (np.cumsum(change)[tied] - 1).astype(np.uint64)
        if passes > 1 and 2 * len(active) >= before:
            # Most units stay tied pass after pass (repeated records): the rest of the keys
            # in one sort instead of a pass per few dozen bits.
            units = order[active] if moved else None
            order[active] = order[active][_sort_rest(group, pending, later, units)]
            return order


def _sort_rest(group: np.ndarray, pending: list[tuple[np.ndarray, int]],
               later: Iterator[_Key], units: np.ndarray | None) -> np.ndarray:
    """The permutation that sorts units by their group, then by the ordinals not sorted by
    yet (``pending``, then the ``later`` keys' of ``units``), in one Arrow sort: the
    ordinals' bits are concatenated, most significant first, into 64-bit words (a key at a
    time, the next keys' ordinals computed meanwhile in threads, so that only the words and a
    few keys' ordinals are held)."""
    words = [group]
    # each array let go of once packed: from the list as taken, a key's when computed
    taken = (pending.pop(0) for _ in range(len(pending)))
    threads = THREADS if len(group) >= PARALLEL_ROWS else 1
    with ThreadPoolExecutor(threads) as pool:
        computed = _ordered(pool, lambda key: key.ordinals(units), later, threads)
        packed = _packed(itertools.chain(taken, itertools.chain.from_iterable(computed)))
        words.extend(packed)
    names = [str(i) for i in range(len(words))]
    table = pa.table(words, names=names)
    keys = [(name, "ascending") for name in names]

    def part(bounds: tuple[int, int]) -> np.ndarray:
        start, end = bounds
        return pc.sort_indices(table.slice(start, end - start), sort_keys=keys).to_numpy() + start

    return np.concatenate(_by_parts(part, group))


def _ordered(pool: ThreadPoolExecutor, fn: Callable[[_Key], T], items: Iterable[_Key],
             depth: int) -> Iterator[T]:
    """``fn`` of each item, in order, computed in ``pool`` at most ``depth`` ahead."""
    running: deque[Future[T]] = deque()
    for item in items:
        running.append(pool.submit(fn, item))
        if len(running) > depth:
            yield running.popleft().result()
    while running:
        yield running.popleft().result()


def _packed(ordinals: Iterable[tuple[np.ndarray, int]]) -> Iterator[np.ndarray]:
    """The ordinals' bits concatenated, most significant first, into 64-bit words (the last
    one as wide as it is: it compares as well unshifted)."""
    word, used = None, 0
    for ordinal, bits in ordinals:
        while bits:
            take = min(bits, 64 - used)
            rest = bits - take
            part = ordinal >> np.uint64(rest) if rest else ordinal
            word = part if word is None else (word << np.uint64(take)) | part
            used, bits = used + take, rest
            if rest:
                ordinal = ordinal & np.uint64((1 << rest) - 1)
            if used == 64:
                yield word
                word, used = None, 0
    if word is not None:
        yield word


def _sort_within(group: np.ndarray, ordinal: np.ndarray, bits: int
                 ) -> tuple[np.ndarray | None, np.ndarray]:
    """The permutation that sorts units by (group, ordinal), None when they already are in
    that order, and the sorted pairs as one array of comparable integers. The group, the
    ``bits`` of the ordinals and the units' positions fit in 64 bits together."""
    m = len(group)
    compound = (group << np.uint64(bits)) | ordinal if int(group[-1]) else ordinal
    if bool((compound[1:] >= compound[:-1]).all()):
        return None, compound
    index_bits = (m - 1).bit_length()
    packed = (compound << np.uint64(index_bits)) | np.arange(m, dtype=np.uint64)
    _by_parts(lambda bounds: packed[bounds[0]:bounds[1]].sort(), group)  # in place
    return ((packed & np.uint64((1 << index_bits) - 1)).astype(np.int64),
            packed >> np.uint64(index_bits))


def _by_parts(sort: Callable[[tuple[int, int]], T], group: np.ndarray) -> list[T]:
    """``sort`` of consecutive parts of the units that together cover them, each part whole
    tie groups (``group`` is nondecreasing), in parallel threads: the units are ordered by
    their group first, so sorting each part sorts them all (numpy's and Arrow's sorts run
    on one thread and release the GIL). One part when there is one group or few units."""
    n = len(group)
    cuts = {0, n}
    if n >= PARALLEL_ROWS:
        cuts.update(int(np.searchsorted(group, group[i * n // THREADS]))
                    for i in range(1, THREADS))
    bounds = sorted(cuts)
    parts = list(zip(bounds[:-1], bounds[1:], strict=True))
    if len(parts) <= 1:
        return [sort((0, n))]
    with ThreadPoolExecutor(len(parts)) as pool:
        return list(pool.map(sort, parts))


_SIGN = np.uint64(1 << 63)
_NEGATIVE_ZERO = {32: np.uint32(1 << 31), 64: _SIGN}  # the bits of -0.0


def _ordinal(arr: pa.Array) -> tuple[np.ndarray, int]:
    """Unsigned integers in the order a sort key array sorts (equal where its values are
    equal, 0 for a null, the least) and how many bits they take (0 only when all are equal)."""
    t = arr.type
    valid = None if not arr.null_count else validity(arr)
    if pa.types.is_boolean(t):
        values = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint64) + 1
        return _nulls_zero(values, valid), 2
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        raw = np.frombuffer(arr.buffers()[1], f"<{'u' if pa.types.is_unsigned_integer(t) else 'i'}"
                            f"{t.bit_width // 8}")[arr.offset:arr.offset + len(arr)]
        values = raw.astype(np.uint64 if pa.types.is_unsigned_integer(t) else np.int64,
                            copy=False)  # not written to
        return _from_integers(values, valid, 1)
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        x = _float_bits(arr).view(f"<f{t.bit_width // 8}")
        return _float_value(x, valid, np.isnan(x))
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)):
        # distinct values ranked by Arrow's sort (by their bytes), then looked up per row
        encoded = pc.dictionary_encode(arr)
        if not len(encoded.dictionary):
            return np.zeros(len(arr), np.uint64), 1  # all null
        rank = np.empty(len(encoded.dictionary), np.uint64)
        rank[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(
            1, len(rank) + 1, dtype=np.uint64)
        indices = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
        return _nulls_zero(rank[indices], valid), len(rank).bit_length()
    # anything else (decimals, float16 values): Arrow's own order, as dense ranks (nulls 1)
    ranks = pc.rank(arr, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
    values = ranks.to_numpy().astype(np.uint64)
    return values, int(values.max()).bit_length()


def _ordinals(arr: pa.Array) -> list[tuple[np.ndarray, int]]:
    """The ordinals of a column's sort key arrays (``sort_keys``), most significant first."""
    t = arr.type
    if not (pa.types.is_float32(t) or pa.types.is_float64(t)):
        return [_ordinal(a) for a in sort_keys(arr)]
    # A float column's second key, its bits, orders only values equal as numbers. Those have
    # the same bits but for 0.0 and -0.0 (then the sign bit) and NaNs (then all their bits),
    # so its ordinals are those bits there and 0 elsewhere (nulls too, tied by the first
    # key): no bits at all for a column without -0.0 and NaN.
    raw = _float_bits(arr)
    x = raw.view(f"<f{t.bit_width // 8}")
    valid = None if not arr.null_count else validity(arr)
    nan = np.isnan(x)
    value = _float_value(x, valid, nan)
    if not nan.any() and not (raw == _NEGATIVE_ZERO[t.bit_width]).any():
        return [value]  # no ties for the bits to break (most float columns)
    tie = np.where(nan, raw, np.where(x == 0, raw >> np.uint64(t.bit_width - 1), 0))
    return [value, _from_integers(_nulls_zero(tie.astype(np.uint64), valid), None, 0)]


def _float_bits(arr: pa.Array) -> np.ndarray:
    """A float32 or float64 array's values as their stored bits (unsigned, no copy)."""
    width = arr.type.bit_width
    return np.frombuffer(arr.buffers()[1], f"<u{width // 8}")[arr.offset:arr.offset + len(arr)]


def _float_value(values: np.ndarray, valid: np.ndarray | None, nan: np.ndarray
                 ) -> tuple[np.ndarray, int]:
    """The ordinals of floats by value: nulls 0, NaN 1 (``nan``: where the values are NaN),
    then the numbers (-0.0 is 0.0)."""
    with np.errstate(invalid="ignore"):  # a float32 signalling NaN is a NaN all the same
        x = values.astype(np.float64, copy=False)
    # numbers by value as unsigned integers: 2**63 plus or minus the magnitude's bits, so
    # that values of few significant bits keep their trailing zeros (minus: the magnitude's
    # bits flipped plus one where the sign is set, in place)
    b = x.view(np.uint64)
    negative = (b.view(np.int64) >> np.int64(63)).view(np.uint64)  # all ones or zero
    s = b & ~_SIGN
    s ^= negative
    s -= negative
    s += _SIGN
    if not nan.any():
        return _from_integers(s, valid, 2)
    ordinal, bits = _from_integers(s, ~nan if valid is None else valid & ~nan, 2)
    ordinal[nan if valid is None else nan & valid] = 1
    return ordinal, max(bits, 1)


def _from_integers(values: np.ndarray, valid: np.ndarray | None, first: int
                   ) -> tuple[np.ndarray, int]:
    """Ordinals of integers (int64 or uint64): each value's distance from the least valid
    one, less the trailing zero bits all distances share, plus ``first``; where ``valid`` is
    False, 0. (Timestamps of whole seconds, floats of whole numbers: far fewer bits to sort.)"""
    present = values if valid is None else values[valid]
    if not len(present):
        return np.zeros(len(values), np.uint64), 0  # all null: all equal
    low, high = int(present.min()), int(present.max())
    if high == low and valid is None:
        return np.zeros(len(values), np.uint64), 0  # all equal
    distance = values.view(np.uint64) - np.uint64(low % (1 << 64))
    if valid is not None:
        distance[~valid] = 0
    common = int(np.bitwise_or.reduce(distance))
    zeros = (common & -common).bit_length() - 1 if common else 0
    span = ((high - low) >> zeros) + first
    if span.bit_length() > 64:  # the full 64-bit range: dense ranks instead
        ranks = np.unique(values, return_inverse=True)[1].astype(np.uint64) + np.uint64(first)
        return _nulls_zero(ranks, valid), int(ranks.max()).bit_length()
    if zeros:
        distance >>= np.uint64(zeros)
    distance += np.uint64(first)
    return _nulls_zero(distance, valid), span.bit_length()


def _nulls_zero(values: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
    if valid is not None:
        values[~valid] = 0
    return values


def sort_keys(arr: pa.Array) -> list[pa.Array]:
    """The key arrays a column sorts by, most significant first (see the module docstring)."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    t = arr.type
    if pa.types.is_dictionary(t):
        return sort_keys(arr.dictionary_decode())
    if pa.types.is_struct(t):
        keys = [pc.is_valid(arr)]
        for field in arr.flatten():  # the struct's nulls made its fields' nulls
            keys.extend(sort_keys(field))
        return keys
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [element_bytes(arr)]
    if pa.types.is_floating(t):
        value = arr.cast(pa.float32()) if pa.types.is_float16(t) else arr
        return [value, arr.view(_UNSIGNED[t.bit_width])]
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return [arr.cast(pa.string() if pa.types.is_string_view(t) else pa.binary())]
    return [arr]
