"""Typed ODF 0.18 metadata objects.

Field order is schema order (it drives both codecs and therefore the block hash). Python names
are the snake_case of the YAML camelCase names. Every optional field defaults to ``None`` and
presence is preserved: ``prepare=[]`` differs from ``prepare=None`` in the hashed bytes.

Union variants carry two class attributes: ``UNION`` (the union's name) and ``KIND`` (the
YAML ``kind:`` tag). The order of variants inside a union is given by ``UNIONS`` and defines
the FlatBuffers type tags (1-based).

Fields marked *extension* are not in ODF 0.18; they are appended at the end of their table so
a block that does not use them hashes exactly as in 0.18 (see ``schemas/EXTENSIONS.md``).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, List, Optional, Union

from .timefmt import TimeInterval


class SourceOrdering(enum.Enum):
    BY_EVENT_TIME = ("byEventTime", 0)
    BY_NAME = ("byName", 1)


class CompressionFormat(enum.Enum):
    GZIP = ("gzip", 0)
    ZIP = ("zip", 1)


# keyword-only, so fields can be declared in schema order whatever their defaults
odf = dataclass(kw_only=True)


def default_scalar(value) -> dict:
    """Field metadata for a scalar with a FlatBuffers schema default (omitted when equal)."""
    return {"fb_default": value}


# --- event time, caching -------------------------------------------------------------------


@odf
class EventTimeSourceFromMetadata:
    UNION: ClassVar[str] = "EventTimeSource"
    KIND: ClassVar[str] = "fromMetadata"


@odf
class EventTimeSourceFromPath:
    UNION: ClassVar[str] = "EventTimeSource"
    KIND: ClassVar[str] = "fromPath"
    pattern: str
    timestamp_format: Optional[str] = None


@odf
class SourceCachingForever:
    UNION: ClassVar[str] = "SourceCaching"
    KIND: ClassVar[str] = "forever"


EventTimeSource = Union[EventTimeSourceFromMetadata, EventTimeSourceFromPath]
SourceCaching = SourceCachingForever

# --- fetch ---------------------------------------------------------------------------------


@odf
class FetchStepUrl:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "url"
    url: str
    event_time: Optional[EventTimeSource] = None
    cache: Optional[SourceCaching] = None


@odf
class FetchStepFilesGlob:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "filesGlob"
    path: str
    event_time: Optional[EventTimeSource] = None
    cache: Optional[SourceCaching] = None
    order: Optional[SourceOrdering] = None


FetchStep = Union[FetchStepUrl, FetchStepFilesGlob]

# --- prepare -------------------------------------------------------------------------------


@odf
class PrepStepDecompress:
    UNION: ClassVar[str] = "PrepStep"
    KIND: ClassVar[str] = "decompress"
    format: CompressionFormat = field(metadata=default_scalar(CompressionFormat.GZIP))
    sub_path: Optional[str] = None


@odf
class PrepStepPipe:
    UNION: ClassVar[str] = "PrepStep"
    KIND: ClassVar[str] = "pipe"
    command: List[str]


PrepStep = Union[PrepStepDecompress, PrepStepPipe]

# --- read ----------------------------------------------------------------------------------


@odf
class ReadStepCsv:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "csv"
    schema: Optional[List[str]] = None
    separator: Optional[str] = None
    encoding: Optional[str] = None
    quote: Optional[str] = None
    escape: Optional[str] = None
    comment: Optional[str] = None
    header: Optional[bool] = None
    enforce_schema: Optional[bool] = None
    infer_schema: Optional[bool] = None
    ignore_leading_white_space: Optional[bool] = None
    ignore_trailing_white_space: Optional[bool] = None
    null_value: Optional[str] = None
    empty_value: Optional[str] = None
    nan_value: Optional[str] = None
    positive_inf: Optional[str] = None
    negative_inf: Optional[str] = None
    date_format: Optional[str] = None
    timestamp_format: Optional[str] = None
    multi_line: Optional[bool] = None


@odf
class ReadStepJsonLines:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "jsonLines"
    schema: Optional[List[str]] = None
    date_format: Optional[str] = None
    encoding: Optional[str] = None
    multi_line: Optional[bool] = None
    primitives_as_string: Optional[bool] = None
    timestamp_format: Optional[str] = None


@odf
class ReadStepGeoJson:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "geoJson"
    schema: Optional[List[str]] = None


@odf
class ReadStepEsriShapefile:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "esriShapefile"
    schema: Optional[List[str]] = None
    sub_path: Optional[str] = None


ReadStep = Union[ReadStepCsv, ReadStepJsonLines, ReadStepGeoJson, ReadStepEsriShapefile]

# --- transform -----------------------------------------------------------------------------


@odf
class SqlQueryStep:
    alias: Optional[str] = None
    query: str


@odf
class TemporalTable:
    id: str
    primary_key: List[str]


@odf
class TransformSql:
    UNION: ClassVar[str] = "Transform"
    KIND: ClassVar[str] = "sql"
    engine: str
    version: Optional[str] = None
    query: Optional[str] = None
    queries: Optional[List[SqlQueryStep]] = None
    temporal_tables: Optional[List[TemporalTable]] = None

    def steps(self) -> List[SqlQueryStep]:
        """The query steps; ``query`` is shorthand for one step without an alias."""
        if self.queries is not None:
            return list(self.queries)
        return [SqlQueryStep(query=self.query or "")]


Transform = TransformSql

# --- merge ---------------------------------------------------------------------------------


@odf
class MergeStrategyAppend:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "append"


@odf
class MergeStrategyLedger:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "ledger"
    primary_key: List[str]


@odf
class MergeStrategySnapshot:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "snapshot"
    primary_key: List[str]
    compare_columns: Optional[List[str]] = None
    observation_column: Optional[str] = None
    obsv_added: Optional[str] = None
    obsv_changed: Optional[str] = None
    obsv_removed: Optional[str] = None


MergeStrategy = Union[MergeStrategyAppend, MergeStrategyLedger, MergeStrategySnapshot]

# --- sources, vocabulary, snapshot -----------------------------------------------------------


@odf
class DatasetSourceRoot:
    UNION: ClassVar[str] = "DatasetSource"
    KIND: ClassVar[str] = "root"
    fetch: FetchStep
    prepare: Optional[List[PrepStep]] = None
    read: ReadStep
    preprocess: Optional[Transform] = None
    merge: MergeStrategy


@odf
class DatasetSourceDerivative:
    UNION: ClassVar[str] = "DatasetSource"
    KIND: ClassVar[str] = "derivative"
    inputs: List[str]
    transform: Transform


DatasetSource = Union[DatasetSourceRoot, DatasetSourceDerivative]


@odf
class DatasetVocabulary:
    system_time_column: Optional[str] = None
    event_time_column: Optional[str] = None

    @property
    def system_time(self) -> str:
        return self.system_time_column or "system_time"

    @property
    def event_time(self) -> str:
        return self.event_time_column or "event_time"


@odf
class DatasetSnapshot:
    id: str
    source: DatasetSource
    vocab: Optional[DatasetVocabulary] = None


# --- blocks ------------------------------------------------------------------------------------


@odf
class DataSlice:
    hash: bytes
    interval: TimeInterval
    num_records: int = field(default=0, metadata=default_scalar(0))
    physical_hash: Optional[bytes] = None  # extension: SHA3-256 of the Parquet file bytes


@odf
class EngineIdentity:
    """Extension: which engine produced a block's output (spec: Engine Versioning)."""

    runtime: str  # "container" or "sandbox"
    version: Optional[str] = None  # engine package version
    spark_version: Optional[str] = None
    image_digest: Optional[str] = None  # container runtime
    files_hash: Optional[str] = None  # sandbox runtime: SHA3-256 over the engine's files
    spark_master: Optional[str] = None
    network_isolated: Optional[bool] = None


@odf
class MetadataBlock:
    block_hash: Optional[bytes] = None
    prev_block_hash: Optional[bytes] = None
    system_time: datetime
    output_slice: Optional[DataSlice] = None
    output_watermark: Optional[datetime] = None
    input_slices: Optional[List[DataSlice]] = None
    source: Optional[DatasetSource] = None
    vocab: Optional[DatasetVocabulary] = None
    engine: Optional[EngineIdentity] = None  # extension



UNIONS = {
    "EventTimeSource": (EventTimeSourceFromMetadata, EventTimeSourceFromPath),
    "SourceCaching": (SourceCachingForever,),
    "FetchStep": (FetchStepUrl, FetchStepFilesGlob),
    "PrepStep": (PrepStepDecompress, PrepStepPipe),
    "ReadStep": (ReadStepCsv, ReadStepJsonLines, ReadStepGeoJson, ReadStepEsriShapefile),
    "Transform": (TransformSql,),
    "MergeStrategy": (MergeStrategyAppend, MergeStrategyLedger, MergeStrategySnapshot),
    "DatasetSource": (DatasetSourceRoot, DatasetSourceDerivative),
}

# Top-level objects a manifest may wrap (``kind:`` of the manifest).
MANIFEST_KINDS = {"DatasetSnapshot": DatasetSnapshot, "MetadataBlock": MetadataBlock}
