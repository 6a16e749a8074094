"""The rules of an ODF 0.39 metadata chain: a pure function over decoded blocks.

``ChainState`` is what the rules need to know of a chain so far; ``append`` checks one more
block against it and returns the state after it, so the same rules serve a whole chain read
oldest first (``check_chain``) and a block about to be committed. Each violation is a one-line
``ChainRuleError`` naming the block's sequence number and hash.

The rules are the ones the reference (kamu-cli v0.265.0, dataset-impl
``metadata_chain_validators.rs``) enforces when a block is appended or pulled:

- the first block is a ``Seed`` and only the first; each block links the previous one by hash
  and numbers it plus one (the first is 0); system time never goes back;
- ``SetTransform`` names at least one input, each a ``did:odf`` id with an alias, none twice;
  a source gives its read schema as DDL or as an ODF schema, not both;
- data events (``AddData``, ``ExecuteTransform``) are not empty and change something (data,
  checkpoint, watermark, source state, inputs); data needs a ``SetDataSchema`` before it;
  ``prevOffset`` and ``prevCheckpoint`` carry on from the previous data event; a slice starts
  right after ``prevOffset`` and does not end before it starts; the watermark never goes back
  nor disappears;
- ``ExecuteTransform`` comes after a ``SetTransform`` and lists its inputs' ids in that
  order; each input carries on from where the previous one ended (block hash and offset),
  and advances its block interval when it advances its offsets;
- a transform (a ``SetTransform``'s, a source's ``preprocess``) is normalized: ``queries``,
  never ``query``; at least one query, the last one without an alias, every other one with;
- a ``SetDataSchema`` is not the schema in force again, and changes it only as
  ``schema_change`` allows (a new column optional, none removed or changed);
- a polling source and push sources are never both added; a push source is not added again
  unchanged; an Ethereum source names its chain; the reference disables no source
  (``DisablePollingSource``, ``DisablePushSource``: "not yet fully supported").
- coord's own: no polling source fetches a File Feed (``FEED_IN_CHAIN``): the fetch step is
  coord's extension, which a manifest may name but the reference cannot decode, so it is kept
  beside the chain (``store.feed_source``).

Messages are the reference's where it has one (``"Transform queries must be normalized"``).

``legacy``: coord's own earlier versions wrote blocks these rules refuse (a transform's single
query as ``query``: ``coord add`` until it normalized it; a push source added after a polling
source: ``coord add --replace``). Where coord reads its own workspace it passes ``legacy=True``
and such a block is taken (a legacy ``query`` read as ``queries: [{query}]``); a pull, and every
block coord writes now, is checked without. ``reference_refusals`` lists the blocks a chain
holds that only ``legacy`` lets through: what ``verify`` and ``push`` report.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ...errors import CoordError
from ..chain import ChainError
from ..did import DatasetId
from ..multiformats import MultiformatError, Multihash
from .events import (
    AddData,
    AddPushSource,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    Seed,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
    normalized_sql,
)
from .schema_change import schema_change_problem
from .source import FetchStepEthereumLogs, FetchStepFileFeed, TransformSql

NOT_NORMALIZED = "Transform queries must be normalized"
DISABLING = "Disabling sources is not yet fully supported"
FEED_IN_CHAIN = ("A File Feed fetch is coord's extension, kept beside the chain, never in a "
                 "polling source")


class ChainRuleError(ChainError):
    """A block that breaks a rule of the chain, named by sequence number and hash."""

    def __init__(self, sequence_number: int, block_hash: Multihash, reason: str):
        # not ChainError's wording: a 0.39 block is named by its number and multihash
        CoordError.__init__(self, f"block {sequence_number} ({block_hash}): {reason}")
        self.block_hash = block_hash.to_bytes()
        self.reason = reason
        self.sequence_number = sequence_number


DataEvent = AddData | ExecuteTransform
Source = SetPollingSource | AddPushSource


@dataclass(frozen=True)
class ChainState:
    """The chain so far, as far as the rules look at it (empty: no block yet)."""

    head: Multihash | None = None
    sequence_number: int = -1
    system_time: datetime | None = None
    schema: SetDataSchema | None = None  # the newest
    last_data: DataEvent | None = None  # the newest AddData or ExecuteTransform
    inputs: tuple[DatasetId, ...] | None = None  # the newest SetTransform's, in order
    sources: tuple[Source, ...] = ()  # every source added, oldest first

    def append(self, block_hash: Multihash, block: MetadataBlock, *,
               legacy: bool = False) -> ChainState:
        """The state after ``block``; raises ``ChainRuleError`` if it breaks a rule
        (``legacy``: but one coord's own earlier versions broke, see the module doc)."""
        problem = self._problem(block, legacy)
        if problem:
            raise ChainRuleError(block.sequence_number, block_hash, problem)
        event = block.event
        after = dataclasses.replace(self, head=block_hash, sequence_number=block.sequence_number,
                                    system_time=block.system_time)
        if isinstance(event, SetDataSchema):
            return dataclasses.replace(after, schema=event)
        if isinstance(event, SetTransform):
            return dataclasses.replace(after, inputs=tuple(_input_ids(event)))
        if isinstance(event, AddData | ExecuteTransform):
            return dataclasses.replace(after, last_data=event)
        if isinstance(event, SetPollingSource | AddPushSource):
            return dataclasses.replace(after, sources=(*self.sources, event))
        return after

    def _problem(self, block: MetadataBlock, legacy: bool) -> str | None:
        first = self.head is None
        if isinstance(block.event, Seed) != first:
            return ("the first block must be a Seed" if first
                    else "a Seed may only be the first block")
        if block.prev_block_hash != self.head:
            return f"prevBlockHash is {block.prev_block_hash}, the previous block is {self.head}"
        if block.sequence_number != self.sequence_number + 1:
            return (f"sequence number follows {self.sequence_number}; "
                    f"it must be {self.sequence_number + 1}")
        if self.system_time is not None and block.system_time < self.system_time:
            return f"system time goes back from {self.system_time.isoformat()}"
        event = block.event
        if isinstance(event, DisablePollingSource | DisablePushSource):
            return DISABLING
        if isinstance(event, SetTransform):
            return _transform_problem(event, legacy)
        if isinstance(event, SetPollingSource | AddPushSource):
            return self._source_problem(event, legacy)
        if isinstance(event, SetDataSchema):
            return self._schema_problem(event)
        if isinstance(event, AddData | ExecuteTransform):
            return self._data_problem(event)
        return None

    def _source_problem(self, event: Source, legacy: bool) -> str | None:
        if event.preprocess is not None:
            problem = _sql_problem(event.preprocess, legacy)
            if problem:
                return problem
        if event.read.ddl_schema is not None and event.read.schema is not None:
            return "Cannot specify both DDL and ODF schemas at once"
        if isinstance(event, SetPollingSource):
            fetch = event.fetch
            if (isinstance(fetch, FetchStepEthereumLogs) and fetch.chain_id is None
                    and fetch.node_url is None):
                return "Eth source must specify chainId or nodeUrl"
            if isinstance(fetch, FetchStepFileFeed):
                return FEED_IN_CHAIN
            if not legacy and any(isinstance(s, AddPushSource) for s in self.sources):
                return "Cannot add a polling source while some push sources are still active"
            return None
        # the newest source that is a polling one or this push source's earlier self decides
        for before in reversed(self.sources):
            if isinstance(before, SetPollingSource):
                return (None if legacy else
                        "Cannot add a push source while polling source is still active")
            if before.source_name == event.source_name:
                return "New push source is identical to existing" if before == event else None
        return None

    def _schema_problem(self, event: SetDataSchema) -> str | None:
        before = self.schema
        if event.schema is None or before is None:
            # a pre-RFC-016 (Arrow) schema is given no ODF schema at this layer: the reference
            # compares it only once converted, which needs Arrow (see the report of this rule)
            return None
        if before.schema is None:
            return None
        return schema_change_problem(before.schema, event.schema)

    def _data_problem(self, event: DataEvent) -> str | None:
        kind = type(event).__name__
        if (event.new_data is None and event.new_checkpoint is None and event.new_watermark is None
                and getattr(event, "new_source_state", None) is None):
            return f"empty {kind}: no data, checkpoint, watermark or source state"
        if event.new_data is not None and self.schema is None:
            return f"{kind} adds data before any SetDataSchema"
        last = self.last_data
        last_offset = _last_offset(last)
        if event.prev_offset != last_offset:
            return f"prevOffset is {event.prev_offset}, the last offset of the chain is {last_offset}"
        if event.new_data is not None:
            interval = event.new_data.offset_interval
            start = 0 if event.prev_offset is None else event.prev_offset + 1
            if interval.start != start:
                return f"the new data starts at offset {interval.start}, it must start at {start}"
            if interval.end < interval.start:
                return f"the new data's offset interval ends ({interval.end}) before it starts"
        last_checkpoint = last.new_checkpoint.physical_hash if last and last.new_checkpoint else None
        if event.prev_checkpoint != last_checkpoint:
            return (f"prevCheckpoint is {event.prev_checkpoint}, the last checkpoint of the chain "
                    f"is {last_checkpoint}")
        last_watermark = last.new_watermark if last else None
        if last_watermark is not None and (event.new_watermark is None
                                           or event.new_watermark < last_watermark):
            return f"the watermark goes back from {last_watermark.isoformat()}"
        if isinstance(event, ExecuteTransform):
            problem = self._inputs_problem(event)
            if problem:
                return problem
        checkpoint = event.new_checkpoint.physical_hash if event.new_checkpoint else None
        if (event.new_data is None and checkpoint == event.prev_checkpoint
                and event.new_watermark == last_watermark and _advances_nothing_else(event, last)):
            return f"{kind} changes nothing: no data, and checkpoint and watermark as before"
        return None

    def _inputs_problem(self, event: ExecuteTransform) -> str | None:
        if self.inputs is None:
            return "ExecuteTransform before any SetTransform"
        ids = tuple(i.dataset_id for i in event.query_inputs)
        if ids != self.inputs:
            return "queryInputs must name the SetTransform's inputs, in its order"
        before = self.last_data.query_inputs if isinstance(self.last_data, ExecuteTransform) else []
        for prev, new in zip(before, event.query_inputs, strict=False):
            problem = _input_problem(prev, new)
            if problem:
                return f"input {new.dataset_id}: {problem}"
        return None


def _input_problem(prev: ExecuteTransformInput, new: ExecuteTransformInput) -> str | None:
    if new.new_block_hash is not None and new.new_block_hash == new.prev_block_hash:
        return "newBlockHash equals prevBlockHash"
    if new.new_offset is not None and new.new_offset == new.prev_offset:
        return "newOffset equals prevOffset"
    last_block = prev.new_block_hash or prev.prev_block_hash
    if new.prev_block_hash != last_block:
        return f"prevBlockHash is {new.prev_block_hash}, the previous step ended at {last_block}"
    last_offset = prev.new_offset if prev.new_offset is not None else prev.prev_offset
    if new.prev_offset != last_offset:
        return f"prevOffset is {new.prev_offset}, the previous step ended at {last_offset}"
    if new.new_offset is not None and new.new_block_hash is None:
        return "new offsets without a newBlockHash"
    return None


def _advances_nothing_else(event: DataEvent, last: DataEvent | None) -> bool:
    if isinstance(event, AddData):
        before = last.new_source_state if isinstance(last, AddData) else None
        return event.new_source_state == before
    return all(i.new_block_hash is None for i in event.query_inputs)


def _last_offset(event: DataEvent | None) -> int | None:
    if event is None:
        return None
    return event.new_data.offset_interval.end if event.new_data else event.prev_offset


def _transform_problem(event: SetTransform, legacy: bool) -> str | None:
    if not event.inputs:
        return "Transform must have at least one input"
    try:
        ids = [None if i.alias is None else DatasetId.parse(i.dataset_ref) for i in event.inputs]
    except MultiformatError:
        ids = [None]
    if None in ids:
        return "Transform inputs must be resolved to dataset IDs and specify aliases"
    twice = sorted({str(i) for i in ids if ids.count(i) > 1})
    if twice:
        return f"Transform contains duplicate inputs: {', '.join(twice)}"
    return _sql_problem(event.transform, legacy)


def _sql_problem(t: TransformSql, legacy: bool) -> str | None:
    """The reference's ``validate_transform``: a transform as the spec stores it."""
    if t.query is not None:
        if not legacy or t.queries is not None:  # coord never wrote both
            return NOT_NORMALIZED
        t = normalized_sql(t)
    if not t.queries:
        return "Transform must have at least one query"
    if t.queries[-1].alias is not None:
        return "Last query in a transform must have no alias an will be treated as an output"
    if any(q.alias is None for q in t.queries[:-1]):
        return "In a transform all queries except the last one must have aliases"
    return None


def _input_ids(event: SetTransform) -> Iterable[DatasetId]:
    return (DatasetId.parse(i.dataset_ref) for i in event.inputs)


def check_chain(blocks: Iterable[tuple[Multihash, MetadataBlock]], *,
                legacy: bool = False) -> ChainState:
    """Check a whole chain given oldest block first; returns the state after its head."""
    state = ChainState()
    for block_hash, block in blocks:
        state = state.append(block_hash, block, legacy=legacy)
    return state


def reference_refusals(blocks: Iterable[tuple[Multihash, MetadataBlock]]) -> list[ChainRuleError]:
    """The blocks of a chain that ``legacy`` lets through and the reference refuses, oldest
    first; the chain must obey every other rule (``check_chain(..., legacy=True)``)."""
    state, refused = ChainState(), []
    for block_hash, block in blocks:
        try:
            state.append(block_hash, block)
        except ChainRuleError as e:
            refused.append(e)
        state = state.append(block_hash, block, legacy=True)
    return refused
