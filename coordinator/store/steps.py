"""The transform steps of a current-ODF (0.39) derivative, per ``ExecuteTransform`` block: which
offsets of which inputs it read and what it wrote (``coord log --builds``).

Invariants:

- An input's range is ``prevOffset + 1 .. newOffset`` (from 0 when it read from the start);
  a step whose input has no ``newOffset`` read nothing of it (``offsets`` is None).
- Inputs are named by the workspace's name for their ``did:odf`` (``overview.CurrentDatasets``),
  the did itself when the workspace does not hold it.
- Nothing but the chain is read: no data file is opened.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..metadata.multiformats import Multihash
from ..metadata.odf39.events import ExecuteTransform
from .overview import CurrentDatasets


@dataclass(frozen=True)
class StepInput:
    dataset: str
    offsets: tuple[int, int] | None  # the first and last offsets read; None: none
    prev_block: Multihash | None
    new_block: Multihash | None


@dataclass(frozen=True)
class Step:
    sequence_number: int
    block_hash: Multihash
    system_time: datetime
    offsets: tuple[int, int] | None  # the offsets it wrote; None: no new records
    watermark: datetime | None
    inputs: tuple[StepInput, ...]

    @property
    def num_records(self) -> int:
        return 0 if self.offsets is None else self.offsets[1] - self.offsets[0] + 1


def steps(current: CurrentDatasets, name: str) -> list[Step]:
    """The dataset's transform steps, newest first."""
    out = []
    for stored in reversed(current.state(name).blocks):
        event = stored.block.event
        if not isinstance(event, ExecuteTransform):
            continue
        inputs = tuple(StepInput(current.name_of(str(q.dataset_id)), _read(q.prev_offset, q.new_offset),
                                 q.prev_block_hash, q.new_block_hash) for q in event.query_inputs)
        data = event.new_data
        offsets = (data.offset_interval.start, data.offset_interval.end) if data is not None else None
        out.append(Step(stored.block.sequence_number, stored.hash, stored.block.system_time, offsets,
                        event.new_watermark, inputs))
    return out


def _read(prev: int | None, new: int | None) -> tuple[int, int] | None:
    if new is None or (prev is not None and new <= prev):
        return None
    return (0 if prev is None else prev + 1, new)
