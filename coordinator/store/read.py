"""A current-ODF dataset folder read in one pass: from ``refs/head`` back to the Seed.

Invariants:

- Each block's bytes are hashed and compared with the name they are stored under before they
  are decoded (``codec.check_stored``); a block is never re-serialized to be checked.
- The walk goes from the head along ``prevBlockHash`` and stops at the first block that is
  missing or damaged, naming it by the sequence number the block after it implies.
- The blocks read are then checked oldest first with the chain rules (``odf39.chain``); the
  state is built in that same pass, so a ``DatasetState`` exists only for a chain that obeys
  them. ``build(blocks, before)`` advances a state by more blocks with the same rules and steps
  (the writer's appends). A workspace's own chain is read taking what coord's earlier versions
  wrote (``odf39.chain``'s ``legacy``); a block appended or pulled is checked ``strict``.
- Reading imports no Arrow (the data layer is imported by ``verify`` only).
- Every problem is one line: ``block <n> (<hash>): <what>`` (``Problem``), the wording of
  ``ChainRuleError``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import CoordError
from ..metadata.did import DatasetId
from ..metadata.flatbuffers_codec import BlockFormatError
from ..metadata.multiformats import MultiformatError, Multihash
from ..metadata.odf39 import codec
from ..metadata.odf39.chain import ChainRuleError, ChainState, reference_refusals
from ..metadata.odf39.events import (
    AddData,
    AddPushSource,
    Checkpoint,
    DatasetKind,
    DataSlice,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    MetadataBlock,
    Seed,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
    SetVocab,
)
from ..metadata.odf39.source import SourceState
from . import layout


class StoreError(CoordError):
    """A dataset folder that is not what its chain says; the message names the place."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a dataset folder, at a block (or at ``refs/head``)."""

    sequence_number: int | None  # None: the head block (missing or damaged: no number known)
    block_hash: Multihash | None  # None: refs/head itself
    reason: str

    def __str__(self) -> str:
        if self.block_hash is None:
            return self.reason
        if self.sequence_number is None:
            return f"head block ({self.block_hash}): {self.reason}"
        return f"block {self.sequence_number} ({self.block_hash}): {self.reason}"


class ChainBroken(StoreError):
    """The chain cannot be read to its Seed, or breaks a rule: the one problem, as a refusal."""

    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


@dataclass(frozen=True)
class StoredBlock:
    hash: Multihash  # the name it is stored under, which its bytes hash to
    block: MetadataBlock


@dataclass(frozen=True)
class SliceRecord:
    """A data slice a block of the chain added."""

    sequence_number: int
    block_hash: Multihash
    system_time: datetime
    slice: DataSlice


@dataclass(frozen=True)
class CheckpointRecord:
    """A checkpoint a block of the chain names as its new one."""

    sequence_number: int
    block_hash: Multihash
    checkpoint: Checkpoint


@dataclass(frozen=True)
class DatasetState:
    """Everything a reader asks of a chain, for the chain up to ``head``."""

    id: DatasetId
    kind: DatasetKind
    blocks: tuple[StoredBlock, ...]  # oldest first
    polling_source: SetPollingSource | None  # in force (a DisablePollingSource ends it)
    push_sources: tuple[AddPushSource, ...]  # in force, by source name, oldest first
    transform: SetTransform | None
    vocab: SetVocab | None  # the system columns' names, when not the defaults
    schema: SetDataSchema | None
    slices: tuple[SliceRecord, ...]  # oldest first
    checkpoints: tuple[CheckpointRecord, ...]  # oldest first
    watermark: datetime | None
    source_state: SourceState | None  # the newest AddData's
    rules: ChainState  # what the chain rules know of it: the next block is checked against it

    @property
    def head(self) -> Multihash:
        return self.blocks[-1].hash

    @property
    def sequence_number(self) -> int:
        return self.blocks[-1].block.sequence_number

    @property
    def last_offset(self) -> int | None:
        return self.slices[-1].slice.offset_interval.end if self.slices else None

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        return self.checkpoints[-1].checkpoint if self.checkpoints else None


def build(oldest_first: list[StoredBlock], before: DatasetState | None = None, *,
          strict: bool = False) -> DatasetState:
    """The state after ``oldest_first`` (continuing ``before``), checked with the chain rules.
    ``strict`` for blocks from elsewhere (a pull) and new ones (an append): every rule the
    reference checks; without, blocks a workspace holds, which may be what coord's earlier
    versions wrote and the reference refuses (``odf39.chain``'s ``legacy``)."""
    rules = before.rules if before else ChainState()
    blocks = list(before.blocks) if before else []
    slices = list(before.slices) if before else []
    checkpoints = list(before.checkpoints) if before else []
    push = {s.source_name: s for s in before.push_sources} if before else {}
    fields: dict[str, Any] = {}  # what the blocks set, over what ``before`` had
    for stored in oldest_first:
        block, n = stored.block, stored.block.sequence_number
        try:
            rules = rules.append(stored.hash, block, legacy=not strict)
        except ChainRuleError as e:
            raise ChainBroken(Problem(e.sequence_number, stored.hash, e.reason)) from None
        blocks.append(stored)
        event = block.event
        if isinstance(event, Seed):
            fields.update(id=event.dataset_id, kind=event.dataset_kind)
        elif isinstance(event, SetPollingSource):
            fields["polling_source"] = event
        elif isinstance(event, DisablePollingSource):
            fields["polling_source"] = None
        elif isinstance(event, AddPushSource):
            push[event.source_name] = event
        elif isinstance(event, DisablePushSource):
            push.pop(event.source_name, None)
        elif isinstance(event, SetTransform):
            fields["transform"] = event
        elif isinstance(event, SetVocab):
            fields["vocab"] = event
        elif isinstance(event, SetDataSchema):
            fields["schema"] = event
        elif isinstance(event, AddData | ExecuteTransform):
            if event.new_data is not None:
                slices.append(SliceRecord(n, stored.hash, block.system_time, event.new_data))
            if event.new_checkpoint is not None:
                checkpoints.append(CheckpointRecord(n, stored.hash, event.new_checkpoint))
            fields["watermark"] = event.new_watermark
            if isinstance(event, AddData) and event.new_source_state is not None:
                fields["source_state"] = event.new_source_state
    common: dict[str, Any] = dict(blocks=tuple(blocks), slices=tuple(slices),
                                  checkpoints=tuple(checkpoints),
                                  push_sources=tuple(push.values()), rules=rules)
    if before is not None:
        return replace(before, **common, **fields)
    defaults: dict[str, Any] = dict(polling_source=None, transform=None, vocab=None,
                                    schema=None, watermark=None, source_state=None)
    return DatasetState(**{**defaults, **fields, **common})


def refused_by_reference(oldest_first: list[StoredBlock]) -> list[Problem]:
    """The blocks of a workspace's chain that coord reads but the reference's pull refuses
    (what coord's earlier versions wrote: ``odf39.chain.reference_refusals``), oldest first;
    none for a chain coord does not read either (a problem of its own: ``ChainBroken``)."""
    named = {b.block.sequence_number: b.hash for b in oldest_first}
    try:
        refused = reference_refusals((b.hash, b.block) for b in oldest_first)
    except ChainRuleError:
        return []
    return [Problem(e.sequence_number, named[e.sequence_number], e.reason) for e in refused]


def blocks_named(state: DatasetState, prefix: str) -> list[StoredBlock]:
    """The blocks whose multihash text (``f1620...``) or digest in hex starts with ``prefix``
    (hex digits, any case): how a user names a block."""
    p = prefix.lower()
    return [b for b in state.blocks if str(b.hash).startswith(p) or b.hash.digest.hex().startswith(p)]


def objects_of(block: MetadataBlock) -> tuple[DataSlice | None, Checkpoint | None]:
    """The data slice and checkpoint a block names, each or both None."""
    event = block.event
    if isinstance(event, AddData | ExecuteTransform):
        return event.new_data, event.new_checkpoint
    return None, None


def read_head(root: Path) -> Multihash | None:
    """The block ``refs/head`` names (None: the folder holds no dataset yet)."""
    try:
        text = (root / layout.HEAD).read_bytes()
    except FileNotFoundError:
        return None
    try:
        return Multihash.parse(text.decode("ascii"))
    except (UnicodeDecodeError, MultiformatError):
        raise StoreError(f"{root / layout.HEAD}: {text[:80]!r} is not a block hash "
                         "(f1620... without a newline); set it to the head block's name") from None


def walk(root: Path, head: Multihash | None = None) -> tuple[list[StoredBlock], Problem | None]:
    """The blocks from the head (or from block ``head``) back to the Seed, newest first, each
    checked against its name; stops at the first block that is missing or damaged and returns
    it as the problem."""
    found: list[StoredBlock] = []
    name: Multihash | None = read_head(root) if head is None else head
    expected: int | None = None  # the number the block after this one implies
    folder = str(root)  # a string: paths are joined per block, pathlib costs more
    while name is not None:
        where = layout.block_file(name)
        try:
            with open(f"{folder}/{where}", "rb") as f:
                stored = f.read()
        except FileNotFoundError:
            named_by = ("refs/head names it" if head is None else "it was asked for") \
                if expected is None else "the next block links it"
            return found, Problem(expected, name, f"{named_by}, but {where} is missing")
        try:
            block = codec.check_stored(stored, name)
        except BlockFormatError as e:
            actual = codec.block_hash(stored)
            reason = (f"{where}: its bytes hash to {actual}; the stored block is damaged"
                      if actual != name else f"{where}: {e}")
            return found, Problem(expected, name, reason)
        found.append(StoredBlock(name, block))
        expected = block.sequence_number - 1
        name = block.prev_block_hash
    return found, None


def read_state(root: Path) -> DatasetState | None:
    """The dataset in ``root``, a folder of coord's own workspace (None: no block yet);
    ``ChainBroken`` names the first problem."""
    newest_first, problem = walk(root)
    if problem is not None:
        raise ChainBroken(problem)
    if not newest_first:
        return None
    return build(newest_first[::-1])
