"""ODF 0.39 metadata events, blocks and dataset snapshots.

A block is ``{systemTime, prevBlockHash, sequenceNumber, event}``: it holds no hash of its
own (its hash is that of its stored bytes, ``codec.py``). Hashes are ``Multihash`` values and
dataset ids ``DatasetId`` (``did:odf``). Field order is schema order (``opendatafabric.fbs``);
the ``MetadataEvent`` variants are in type-tag order (AddData = 1 ... DisablePollingSource = 13).
Names follow RFC-013 (``RFC013_NAMES``).
"""
from __future__ import annotations

import enum
from dataclasses import field, replace
from datetime import datetime
from typing import ClassVar

from ..did import DatasetId
from ..multiformats import Multihash
from ..objects import default_scalar, odf
from ..shape import U64
from .data import Base64Bytes, DataSchema, ExtraAttributes
from .source import (
    FetchStep,
    MergeStrategy,
    PrepStep,
    ReadStep,
    SourceState,
    SqlQueryStep,
    TransformSql,
)

RFC013_NAMES = True


class DatasetKind(enum.Enum):
    ROOT = ("Root", 0)
    DERIVATIVE = ("Derivative", 1)


@odf
class OffsetInterval:
    """Offsets ``start`` to ``end``, both included."""

    start: U64 = field(metadata=default_scalar(0))
    end: U64 = field(metadata=default_scalar(0))


@odf
class DataSlice:
    logical_hash: Multihash
    physical_hash: Multihash
    offset_interval: OffsetInterval
    size: U64 = field(metadata=default_scalar(0))  # bytes of the data file


@odf
class Checkpoint:
    physical_hash: Multihash
    size: U64 = field(metadata=default_scalar(0))


@odf
class Watermark:
    system_time: datetime
    event_time: datetime


# --- events ----------------------------------------------------------------------------------


@odf
class AddData:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "AddData"
    prev_checkpoint: Multihash | None = None
    prev_offset: U64 | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: datetime | None = None
    new_source_state: SourceState | None = None
    extra: ExtraAttributes | None = None


@odf
class ExecuteTransformInput:
    dataset_id: DatasetId
    prev_block_hash: Multihash | None = None
    new_block_hash: Multihash | None = None
    prev_offset: U64 | None = None
    new_offset: U64 | None = None


@odf
class ExecuteTransform:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "ExecuteTransform"
    query_inputs: list[ExecuteTransformInput]
    prev_checkpoint: Multihash | None = None
    prev_offset: U64 | None = None
    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: datetime | None = None


@odf
class Seed:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "Seed"
    dataset_id: DatasetId
    dataset_kind: DatasetKind = field(metadata=default_scalar(DatasetKind.ROOT))


@odf
class SetPollingSource:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetPollingSource"
    fetch: FetchStep
    prepare: list[PrepStep] | None = None
    read: ReadStep
    preprocess: TransformSql | None = None
    merge: MergeStrategy


@odf
class TransformInput:
    dataset_ref: str  # a did:odf id, a name or an account/name alias
    alias: str | None = None


@odf
class SetTransform:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetTransform"
    inputs: list[TransformInput]
    transform: TransformSql


@odf
class SetVocab:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetVocab"
    offset_column: str | None = None
    operation_type_column: str | None = None
    system_time_column: str | None = None
    event_time_column: str | None = None


@odf
class AttachmentEmbedded:
    path: str
    content: str


@odf
class AttachmentsEmbedded:
    UNION: ClassVar[str] = "Attachments"
    KIND: ClassVar[str] = "Embedded"
    items: list[AttachmentEmbedded]


@odf
class SetAttachments:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetAttachments"
    attachments: AttachmentsEmbedded


@odf
class SetInfo:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetInfo"
    description: str | None = None
    keywords: list[str] | None = None


@odf
class SetLicense:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetLicense"
    short_name: str
    name: str
    spdx_id: str | None = None
    website_url: str


@odf
class SetDataSchema:
    """The dataset's schema: an ODF ``schema``, or (in blocks written before RFC-016) the
    Arrow IPC bytes of one (``rawArrowSchema``)."""

    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "SetDataSchema"
    raw_arrow_schema: Base64Bytes | None = None
    schema: DataSchema | None = None


@odf
class AddPushSource:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "AddPushSource"
    source_name: str
    read: ReadStep
    preprocess: TransformSql | None = None
    merge: MergeStrategy


@odf
class DisablePushSource:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "DisablePushSource"
    source_name: str


@odf
class DisablePollingSource:
    UNION: ClassVar[str] = "MetadataEvent"
    KIND: ClassVar[str] = "DisablePollingSource"


MetadataEvent = (
    AddData | ExecuteTransform | Seed | SetPollingSource | SetTransform | SetVocab
    | SetAttachments | SetInfo | SetLicense | SetDataSchema | AddPushSource
    | DisablePushSource | DisablePollingSource
)

# --- blocks and snapshots ----------------------------------------------------------------------


@odf
class MetadataBlock:
    system_time: datetime
    prev_block_hash: Multihash | None = None
    sequence_number: U64 = field(metadata=default_scalar(0))
    event: MetadataEvent


@odf
class DatasetSnapshot:
    """What a user writes to create a dataset: its name, kind and first events."""

    name: str
    kind: DatasetKind = field(metadata=default_scalar(DatasetKind.ROOT))
    metadata: list[MetadataEvent]


UNIONS = {
    "MetadataEvent": (
        AddData, ExecuteTransform, Seed, SetPollingSource, SetTransform, SetVocab,
        SetAttachments, SetInfo, SetLicense, SetDataSchema, AddPushSource, DisablePushSource,
        DisablePollingSource,
    ),
    "Attachments": (AttachmentsEmbedded,),
}


def normalized(event: MetadataEvent) -> MetadataEvent:
    """``event`` as the spec stores it: a transform (a derivative's, or a source's preprocess)
    never sets ``query``; a single query is ``queries: [{query}]`` (the reference refuses a
    chain that stores ``query``). Other events, and normalized ones, are returned as they are."""
    if isinstance(event, SetTransform):
        return replace(event, transform=normalized_sql(event.transform))
    if isinstance(event, (SetPollingSource, AddPushSource)) and event.preprocess is not None:
        return replace(event, preprocess=normalized_sql(event.preprocess))
    return event


def normalized_sql(t: TransformSql) -> TransformSql:
    """``t`` with a single ``query`` as ``queries: [{query}]`` (as it is, given both)."""
    if t.query is None or t.queries is not None:  # both given is refused where it is written
        return t
    return replace(t, query=None, queries=[SqlQueryStep(query=t.query)])
