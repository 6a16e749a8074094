"""A snapshot or ledger dataset read as the table it describes: ODF's projection of its
change log onto one row per primary key (``coord sql``'s ``"<id>@state"``, ``coord tail
--state``, the API's ``state``).

Invariants:
- Only a root whose merge strategy has a primary key (snapshot, ledger) has a state: the key
  and the snapshot's observation column are those of the source in force at the block read
  (a current-ODF root's: its source in force now, through ``odf39.adapt``; a ledger's records
  are all appends, so the projection is the same; a snapshot's carry operation types, see
  below).
  An append root or a derivative has none (ODF 0.18 gives them no key), and asking for its
  state is refused in one line saying so.
- The state holds, per key, its latest record by event time, ties broken by system time and
  then by stored order (slices oldest first, rows in their order); a key whose latest
  record is a snapshot's removal (observation column = its ``removed`` value, ``D`` by
  default) is left out. Every column of the change log is kept, the observation column too.
- A current-ODF snapshot root's state is ODF's projection of its records as the reference
  computes it: per key the record of the highest offset (its stored order), left out if it
  is a retraction (op 1); a correction's correct-to record comes after its correct-from.
- As of an event time T (ODF's AS OF, "what was true at T"), only the records that took
  effect at or before T count, and a record takes effect at its event time, with one
  exception: a current-ODF retraction or correct-from repeats the record it removes, event
  time included (ODF's rule), so its own event time is when that record appeared, not when it
  was removed; it takes effect at the watermark of the block that wrote it (``AddData``'s
  ``newWatermark``: the latest of the watermark before, the event time of the records the
  block read, those its merge kept none of too, and the event time its fetch gave, as
  ``ingest.pipeline`` sets it). A block with no watermark (none set yet) has its removals
  counted from the start. Watermarks never go back along a chain, so the removals that count
  are exactly those of the slices before the first block whose watermark is after T
  (``removals_counted``). Per merge: a snapshot's removals take effect at the snapshot's
  time (its fetch's event time, else the latest event time of its rows, or the one it was
  pushed with); an upsert stream's deletion is stored as a retraction of the values held,
  so it takes effect at the latest event time of its push (changes of other moments go in
  other pushes); a changelog's retraction given its own event time must repeat the
  retracted one, so a push of retractions alone takes effect at the watermark before it
  (``coord pull --set-watermark`` moves it first), while one pushed with ``--event-time``
  carries that time, as its block's watermark does. A 0.18 removal (``D``) carries the
  snapshot's event time (its fetch's, else the latest of its rows', else the pull's system
  time): its own is right. The system time is bounded separately, by the read's
  ``--as-at`` (ODF's AS AT, "what was known at T"): the records of the blocks committed by
  then, nothing else.
- It is one DuckDB query (a window over the key, ``QUALIFY``), never a loop per row; row
  order within the scan is DuckDB's streaming ``row_number() OVER ()``, which keeps the
  order of the Arrow dataset (slices oldest first).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..data.odf_slice import Op
from ..errors import Invalid
from ..ingest.merge import SnapshotColumns
from ..metadata.objects import (
    DatasetSource,
    DatasetVocabulary,
    MergeStrategyLedger,
    MergeStrategySnapshot,
)
from ..metadata.odf39.adapt import STREAM_MERGES
from ..metadata.timestamps import format_timestamp

if TYPE_CHECKING:
    from ..metadata.odf39.adapt import PushSource

STATE_SUFFIX = "@state"  # not a character of a dataset id, so no id can take the name
ROW = "__coord_stored_row"  # the helper column of stored order, not shown


class NoState(Invalid):
    """The dataset has no primary key, so there is no state to project."""


@dataclass(frozen=True)
class StateKey:
    """What the projection of one dataset needs from its definition."""

    key: tuple[str, ...]
    event_time: str
    system_time: str
    observation: str | None  # a snapshot's observation column; None for a ledger
    removed: str | int | None  # the observation value of a removal
    by_offset: bool = False  # latest = last stored (ODF 0.39 operation types), not by event time


@dataclass(frozen=True)
class Written:
    """One slice of a current-ODF change log, as its state as of an event time needs it: how
    many records it holds and the watermark of the block that wrote it (None: none set)."""

    records: int
    watermark: datetime | None


def removals_counted(written: Sequence[Written], as_of: datetime) -> int:
    """How many records, from the first stored, the slices before the first block with a
    watermark after ``as_of`` hold: their removals took effect by then (the module doc)."""
    counted = 0
    for w in written:
        if w.watermark is not None and w.watermark > as_of:
            break
        counted += w.records
    return counted


def state_key(source: DatasetSource | PushSource, vocab: DatasetVocabulary,
              operation_type: str | None = None) -> StateKey | None:
    """The state a dataset of that definition has, or None (no primary key);
    ``operation_type``: a current-ODF dataset's operation type column."""
    merge = getattr(source, "merge", None)  # a root's or a push source's; a derivative has none
    if isinstance(merge, (MergeStrategySnapshot, *STREAM_MERGES)):  # stream merges: 0.39 roots
        roles = SnapshotColumns.of(merge, operation_type)
        return StateKey(tuple(roles.key), vocab.event_time, vocab.system_time, roles.observation,
                        roles.removed, by_offset=roles.ops)
    if isinstance(merge, MergeStrategyLedger):
        return StateKey(tuple(merge.primary_key), vocab.event_time, vocab.system_time, None, None)
    return None


def no_state(dataset: str, source: DatasetSource | PushSource | None) -> str:
    """Why ``dataset`` has no state, in one line (``source`` None: a current-ODF derivative)."""
    merge = getattr(source, "merge", None)
    what = f"its merge strategy is {merge.KIND}" if merge is not None else "it is a derivative"
    return (f"dataset {dataset} has no state: {what}, so it has no primary key to project its "
            f'records on (only snapshot and ledger roots have one); its records are "{dataset}"')


def state_sql(relation: str, key: StateKey, as_of: datetime | None = None, last: int | None = None,
              written: Sequence[Written] = (), keys_of: str | None = None) -> str:
    """The DuckDB query of the state of the change log ``relation`` (a quoted name), as of
    event time ``as_of`` if given (``written``: a current-ODF change log's slices, oldest
    first, which place its removals in time); with ``last``, the last rows by the stored order
    of their versions, in that order (else in no order: a table, sorting it costs a third more);
    with ``keys_of`` (a relation holding the key's columns), only the rows of the keys it holds
    (a key's row depends on its records alone, so the others need not be ranked)."""
    event, system = quoted(key.event_time), quoted(key.system_time)
    numbered = f"(SELECT *, row_number() OVER () AS {ROW} FROM {relation})"
    if keys_of is not None:  # after the numbering: a join need not keep the stored order
        match = " AND ".join(f"n.{quoted(k)} IS NOT DISTINCT FROM k.{quoted(k)}" for k in key.key)
        numbered = (f"(SELECT * FROM {numbered} n SEMI JOIN "
                    f"(SELECT DISTINCT {', '.join(map(quoted, key.key))} FROM {keys_of}) k ON {match})")
    bound = ""
    if as_of is not None:
        bound = f"{event} <= TIMESTAMPTZ '{format_timestamp(as_of)}'"
        if key.by_offset and key.observation is not None:  # a removal by its block's watermark
            # (ROW numbers the stored records from 1: the first n are ROW <= n)
            bound = (f"CASE WHEN {quoted(key.observation)} IN ({int(Op.RETRACT)}, "
                     f"{int(Op.CORRECT_FROM)}) THEN {ROW} <= {removals_counted(written, as_of)} "
                     f"ELSE {bound} END")
        bound = f" WHERE {bound}"
    order = f"{ROW} DESC" if key.by_offset else f"{event} DESC, {system} DESC, {ROW} DESC"
    latest = (f"SELECT * FROM {numbered}{bound} "
              f"QUALIFY row_number() OVER (PARTITION BY {', '.join(map(quoted, key.key))} "
              f"ORDER BY {order}) = 1")
    rows = f"SELECT * FROM ({latest})"
    if key.observation is not None:
        removed = key.removed if isinstance(key.removed, int) else literal(key.removed or "")
        rows += f" WHERE {quoted(key.observation)} IS DISTINCT FROM {removed}"
    if last is None:
        return f"SELECT * EXCLUDE ({ROW}) FROM ({rows})"
    return f"SELECT * EXCLUDE ({ROW}) FROM ({rows} ORDER BY {ROW} DESC LIMIT {int(last)}) ORDER BY {ROW}"


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
