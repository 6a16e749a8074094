"""The batch step: what a derivative has not processed yet, read from the metadata chains.

An executed block records, per input and in the order of ``inputs``, the slice of the input it
consumed (see ``schemas/DERIVATIVE-BLOCKS.md``): the system-time interval of the input blocks
(``(a, b]``; ``(-inf, b]`` the first time; ``()`` when nothing new), the number of records and a
hash of those blocks' slice hashes. The right end ``b`` of the newest non-empty interval is
where the next step continues (``builds.consumed_until``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..metadata.objects import (
    DatasetSourceRoot,
    DatasetVocabulary,
    DataSlice,
    MergeStrategySnapshot,
    MetadataBlock,
    TransformSql,
)
from ..metadata.timestamps import IntervalType, TimeInterval
from ..trust.slice_check import checked_slices
from ..workspace import Dataset, DatasetState, Workspace
from .builds import consumed_until, query_in_force_at, source_of


@dataclass
class InputPlan:
    dataset: Dataset
    vocab: DatasetVocabulary
    schema: pa.Schema | None  # None while the input has no data at all
    after: datetime | None  # system time of the last input block already consumed
    blocks: list[tuple[bytes, MetadataBlock]] = field(default_factory=list)  # new ones, oldest first
    removal: tuple[str, str] | None = None  # a snapshot merge's (observation column, removed value)

    @property
    def data_paths(self) -> list[Path]:
        """The new blocks' slices, each checked against its block: what the engine reads."""
        return checked_slices(self.dataset, self.blocks)

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


def plan_transform(ws: Workspace, ds: Dataset, state: DatasetState | None = None) -> TransformPlan:
    """The next step of ``ds``; ``state``: its read model when the caller holds it."""
    state = state or ds.state()
    chain = state.blocks
    source = source_of(chain, ds.id)
    vocab = state.vocab

    after = consumed_until(chain, len(source.inputs))
    prev_checkpoint = prev_transform = None
    last_hash = state.last_run
    if last_hash is not None:
        checkpoint = ds.checkpoint_dir(last_hash)
        prev_checkpoint = checkpoint if checkpoint.exists() else None
        in_force = query_in_force_at(chain, last_hash)[1]
        prev_transform = in_force if in_force != source.transform else None

    inputs = [plan_input(ws.dataset(i), a) for i, a in zip(source.inputs, after, strict=True)]
    return TransformPlan(ds, state.head, state.last_updated, source.transform, vocab, inputs,
                         prev_checkpoint, prev_transform)


def plan_input(ds: Dataset, after: datetime | None, until: datetime | None = None) -> InputPlan:
    """The input's blocks with a system time in ``(after, until]`` (``until`` None: its head).

    The schema is that of its newest data file up to ``until``: what the engine plans with."""
    new, vocab, schema, source = [], None, None, None
    for h, b in ds.blocks():
        if until is not None and b.system_time > until:
            continue
        if after is None or b.system_time > after:
            new.append((h, b))
        vocab = vocab or b.vocab
        source = source or b.source
        if schema is None and b.output_slice is not None:
            schema = pq.read_schema(ds.data_file(h))
    new.reverse()
    return InputPlan(ds, vocab or DatasetVocabulary(), schema, after, new, _removal(source))


def _removal(source) -> tuple[str, str] | None:
    """Which rows of a snapshot root remove their key (what a temporal table of it drops)."""
    if not isinstance(source, DatasetSourceRoot) or not isinstance(source.merge, MergeStrategySnapshot):
        return None
    from ..ingest.merge import SnapshotColumns

    columns = SnapshotColumns.of(source.merge)  # a 0.18 root's: observed values are text
    return columns.observation, str(columns.removed)
