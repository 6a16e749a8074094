"""The batch step: what a derivative has not processed yet, read from the metadata chains.

An executed block records, per input and in the order of ``inputs``, the slice of the input it
consumed (see ``schemas/DERIVATIVE-BLOCKS.md``): the system-time interval of the input blocks
(``(a, b]``; ``(-inf, b]`` the first time; ``()`` when nothing new), the number of records and a
hash of those blocks' slice hashes. The right end ``b`` of the newest non-empty interval is
where the next step continues.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CoordError
from ..metadata.objects import (
    DatasetSourceDerivative,
    DatasetVocabulary,
    DataSlice,
    MetadataBlock,
    TransformSql,
)
from ..metadata.timefmt import IntervalType, TimeInterval
from ..workspace import Dataset, Workspace


@dataclass
class InputPlan:
    dataset: Dataset
    vocab: DatasetVocabulary
    schema: pa.Schema | None  # None while the input has no data at all
    after: datetime | None  # system time of the last input block already consumed
    blocks: list[tuple[bytes, MetadataBlock]] = field(default_factory=list)  # new ones, oldest first

    @property
    def data_paths(self) -> list[Path]:
        return [self.dataset.data_file(h) for h, b in self.blocks if b.output_slice is not None]

    @property
    def explicit_watermarks(self) -> list[tuple[datetime, datetime]]:
        return [(b.system_time, b.output_watermark) for _, b in self.blocks if b.output_watermark]

    def consumed_slice(self) -> DataSlice:
        """The inputSlice the output block records for this input."""
        slices = [b.output_slice for _, b in self.blocks if b.output_slice is not None]
        digest = hashlib.sha3_256(b"".join(s.hash for s in slices)).digest()
        if not self.blocks:
            interval = TimeInterval(IntervalType.EMPTY)
        elif self.after is None:
            interval = TimeInterval(IntervalType.UNBOUNDED_CLOSED_RIGHT, None, self.blocks[-1][1].system_time)
        else:
            interval = TimeInterval(IntervalType.LEFT_HALF_OPEN, self.after, self.blocks[-1][1].system_time)
        return DataSlice(hash=digest, interval=interval, num_records=sum(s.num_records for s in slices))


@dataclass
class TransformPlan:
    dataset: Dataset
    head: bytes
    head_time: datetime
    transform: TransformSql  # the query in force now
    vocab: DatasetVocabulary
    inputs: list[InputPlan]
    prev_checkpoint: Path | None  # engine state after the last executed block
    prev_transform: TransformSql | None  # the query of the last executed block, when it differs

    @property
    def needs_migration(self) -> bool:
        return self.prev_transform is not None

    @property
    def has_new_input(self) -> bool:
        return any(i.blocks for i in self.inputs)

    @property
    def up_to_date(self) -> bool:
        return not self.has_new_input and not self.needs_migration

    @property
    def waiting_for(self) -> list[str]:
        """Inputs that never had data: the engine cannot plan a query over them yet."""
        return [i.dataset.id for i in self.inputs if i.schema is None]

    def transaction_id(self) -> str:
        """The same step (same head, same new inputs, same query) always gets the same id."""
        h = hashlib.sha3_256(self.head)
        for i in self.inputs:
            h.update(b"".join(bh for bh, _ in i.blocks) + b"|")
        h.update(repr(self.transform).encode())
        return h.hexdigest()[:24]


def plan_transform(ws: Workspace, ds: Dataset) -> TransformPlan:
    chain = list(ds.blocks())
    head, head_block = chain[0]
    source = next(b.source for _, b in chain if b.source is not None)
    if not isinstance(source, DatasetSourceDerivative):
        raise CoordError(f"{ds.id} is not a derivative dataset")
    vocab = next((b.vocab for _, b in chain if b.vocab is not None), DatasetVocabulary())

    executed = [(h, b) for h, b in chain if b.input_slices is not None]
    after: list[datetime | None] = [None] * len(source.inputs)
    for _, b in reversed(executed):  # oldest first, so newer bounds win
        for i, s in enumerate(b.input_slices[: len(after)]):
            if s.interval.type is not IntervalType.EMPTY:
                after[i] = s.interval.right
    prev_checkpoint = prev_transform = None
    if executed:
        last_hash = executed[0][0]
        checkpoint = ds.checkpoint_dir(last_hash)
        prev_checkpoint = checkpoint if checkpoint.exists() else None
        in_force = _transform_in_force_at(chain, last_hash)
        prev_transform = in_force if in_force != source.transform else None

    inputs = [plan_input(ws.dataset(i), a) for i, a in zip(source.inputs, after, strict=True)]
    return TransformPlan(ds, head, head_block.system_time, source.transform, vocab, inputs,
                         prev_checkpoint, prev_transform)


def _transform_in_force_at(chain, block_hash: bytes) -> TransformSql:
    """The transform of the newest source block at or before ``block_hash``."""
    seen = False
    for h, b in chain:
        seen = seen or h == block_hash
        if seen and b.source is not None:
            return b.source.transform
    raise ValueError("no source before the executed block")


def plan_input(ds: Dataset, after: datetime | None, until: datetime | None = None) -> InputPlan:
    """The input's blocks with a system time in ``(after, until]`` (``until`` None: its head).

    The schema is that of its newest data file up to ``until``: what the engine plans with."""
    new, vocab, schema = [], None, None
    for h, b in ds.blocks():
        if until is not None and b.system_time > until:
            continue
        if after is None or b.system_time > after:
            new.append((h, b))
        vocab = vocab or b.vocab
        if schema is None and b.output_slice is not None:
            schema = pq.read_schema(ds.data_file(h))
    new.reverse()
    return InputPlan(ds, vocab or DatasetVocabulary(), schema, after, new)
