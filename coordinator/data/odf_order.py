"""The canonical record order of a current-ODF slice (``schemas/ODF-039-DATA.md``, "Order").

arrow-digest V0 depends on row order, so the coordinator stores every slice in one order that
depends only on the records: a replay of the same records, in any order and any chunking,
sorts to the same table and so hashes the same.

Invariants:

- Records are ordered by the event time, then the operation type, then every data column in
  stored order, each by its typed value: nulls first; floats by value with NaN before every
  number, and equal values (0.0 and -0.0, NaN payloads) by their bits; strings and binaries by
  their bytes; booleans false first; a struct by whether it is null, then its fields in order
  (a null struct's fields count as null); a list by its arrow-digest encoding (a total order,
  not a natural one: its length first, little-endian).
- Records that compare equal on all of these are equal in every byte the hash reads, so how
  ties are broken cannot show.
- A correct-from record and the correct-to record after it move as one unit, placed by the
  correct-from record's event time, operation type and values, then the correct-to record's
  event time and values (every other record counts as its own partner here).
- Vectorised: one Arrow sort over key columns; Python loops over columns, never over rows.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_digest import element_bytes

__all__ = ["canonical_order", "sort_keys"]

_CORRECT_FROM, _CORRECT_TO = 2, 3  # odf_slice.Op (which imports this module)
_UNSIGNED = {16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}


def canonical_order(table: pa.Table, ops: np.ndarray, event_time: str) -> np.ndarray:
    """Row indices of ``table`` (the event time and data columns, types as stored) in
    canonical order, given the rows' operation types; correct-from/to pairs must be adjacent."""
    n = table.num_rows
    if not n:
        return np.zeros(0, np.int64)
    leaders = np.flatnonzero(ops != _CORRECT_TO)
    pairs = ops[leaders] == _CORRECT_FROM
    data = [c for c in table.column_names if c != event_time]

    def keys_of(rows: np.ndarray | None, names: list[str]) -> list[pa.Array]:
        keys: list[pa.Array] = []
        for name in names:
            column = table[name].combine_chunks()
            keys.extend(sort_keys(column if rows is None else column.take(pa.array(rows))))
        return keys

    rows = None if len(leaders) == n else leaders
    keys = keys_of(rows, [event_time])
    if ops.min() != ops.max():
        keys.append(pa.array(ops[leaders]))
    keys.extend(keys_of(rows, data))
    if pairs.any():
        # then the correct-to record's event time and values
        keys.extend(keys_of(leaders + pairs, [event_time, *data]))
    names = [str(i) for i in range(len(keys))]
    order = pc.sort_indices(pa.table(keys, names=names),
                            sort_keys=[(k, "ascending", "at_start") for k in names])
    first = order.to_numpy() if rows is None else leaders[order.to_numpy()]
    if not pairs.any():
        return first
    sizes = 1 + (ops[first] == _CORRECT_FROM)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(first, sizes) + (np.arange(n) - starts)


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
