"""Rules every data slice follows, whoever made it (ingest or an engine): one place each.

- An output slice covers the singleton system-time interval ``[t, t]`` of its block and
  records its logical hash (``schemas/DATA-HASHING.md``) and physical hash (``output_slice``).
- A dataset's schema may only gain columns: every column of the earlier slices stays, with
  its type; new columns come after them (``compare_schemas`` says what a new schema changes,
  ``metadata.schema_evolution`` decides what is allowed; ingest converts a changed type when it can).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..metadata.objects import DataSlice
from ..metadata.timestamps import TimeInterval

if TYPE_CHECKING:
    import pyarrow as pa

def output_slice(*, logical_hash: bytes, physical_hash: bytes, num_records: int,
                 system_time: datetime) -> DataSlice:
    """The DataSlice a block records for the slice it adds at ``system_time``."""
    return DataSlice(hash=logical_hash, interval=TimeInterval.singleton(system_time),
                     num_records=num_records, physical_hash=physical_hash)


@dataclass(frozen=True)
class SchemaChange:
    """How a new schema differs from the earlier one (the system time column left out)."""

    kept: tuple[pa.Field, ...]  # the earlier columns, in their order
    dropped: tuple[str, ...]  # earlier columns the new schema lacks: never allowed
    retyped: tuple[tuple[pa.Field, pa.DataType], ...]  # (earlier column, its new type)
    added: tuple[pa.Field, ...]  # new columns, in the new schema's order


def compare_schemas(previous: pa.Schema, new: pa.Schema, system_time: str) -> SchemaChange:
    kept = tuple(f for f in previous if f.name != system_time)
    dropped = tuple(f.name for f in kept if f.name not in new.names)
    retyped = tuple((f, new.field(f.name).type) for f in kept
                    if f.name in new.names and not new.field(f.name).type.equals(f.type))
    added = tuple(f for f in new if f.name not in previous.names)
    return SchemaChange(kept, dropped, retyped, added)
