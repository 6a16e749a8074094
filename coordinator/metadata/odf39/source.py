"""ODF 0.39 sources and transforms: how a root dataset fetches, prepares, reads and merges
data (``SetPollingSource``, ``AddPushSource``), and the SQL a derivative runs.

Field order is schema order (``opendatafabric.fbs``); union variants are in type-tag order.
Names follow RFC-013 (``RFC013_NAMES``).
"""
from __future__ import annotations

import enum
from dataclasses import field
from typing import ClassVar

from ..objects import default_scalar, odf
from ..shape import I32, U64
from .data import DataSchema

RFC013_NAMES = True


class SourceOrdering(enum.Enum):
    BY_EVENT_TIME = ("ByEventTime", 0)
    BY_NAME = ("ByName", 1)


class CompressionFormat(enum.Enum):
    GZIP = ("Gzip", 0)
    ZIP = ("Zip", 1)


class SuccessMarker(enum.Enum):
    """coord's extension (``FetchStepFileFeed``): what a File Feed update's ``_SUCCESS`` holds."""

    COUNT = ("Count", 0)
    HADOOP = ("Hadoop", 1)


class MqttQos(enum.Enum):
    AT_MOST_ONCE = ("AtMostOnce", 0)
    AT_LEAST_ONCE = ("AtLeastOnce", 1)
    EXACTLY_ONCE = ("ExactlyOnce", 2)


# --- event time, caching -------------------------------------------------------------------


@odf
class EventTimeSourceFromMetadata:
    UNION: ClassVar[str] = "EventTimeSource"
    KIND: ClassVar[str] = "FromMetadata"


@odf
class EventTimeSourceFromPath:
    UNION: ClassVar[str] = "EventTimeSource"
    KIND: ClassVar[str] = "FromPath"
    pattern: str
    timestamp_format: str | None = None


@odf
class EventTimeSourceFromSystemTime:
    UNION: ClassVar[str] = "EventTimeSource"
    KIND: ClassVar[str] = "FromSystemTime"


EventTimeSource = EventTimeSourceFromMetadata | EventTimeSourceFromPath | EventTimeSourceFromSystemTime


@odf
class SourceCachingForever:
    UNION: ClassVar[str] = "SourceCaching"
    KIND: ClassVar[str] = "Forever"


# --- fetch ---------------------------------------------------------------------------------


@odf
class RequestHeader:
    name: str
    value: str


@odf
class FetchStepUrl:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "Url"
    url: str
    event_time: EventTimeSource | None = None
    cache: SourceCachingForever | None = None
    headers: list[RequestHeader] | None = None


@odf
class FetchStepFilesGlob:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "FilesGlob"
    path: str
    event_time: EventTimeSource | None = None
    cache: SourceCachingForever | None = None
    order: SourceOrdering | None = None


@odf
class EnvVar:
    name: str
    value: str | None = None


@odf
class FetchStepContainer:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "Container"
    image: str
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None


@odf
class MqttTopicSubscription:
    path: str
    qos: MqttQos | None = None


@odf
class FetchStepMqtt:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "Mqtt"
    host: str
    port: I32 = field(metadata=default_scalar(0))
    username: str | None = None
    password: str | None = None
    topics: list[MqttTopicSubscription]


@odf
class FetchStepEthereumLogs:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "EthereumLogs"
    chain_id: U64 | None = None
    node_url: str | None = None
    filter: str | None = None
    signature: str | None = None


@odf
class FetchStepFileFeed:
    """coord's extension (union tag 128, as in ODF 0.18's ``objects.FetchStepFileFeed``,
    docs/feeds.md): a File Feed's updates. Only a DatasetSnapshot manifest names it: a chain
    never holds it (the source is kept beside the chain, ``store.feed_source``), and the chain
    rules refuse a block that does (``chain.FEED_IN_CHAIN``)."""

    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "FileFeed"
    TAG: ClassVar[int] = 128
    url: str
    partitions: int | None = None
    success_marker: SuccessMarker | None = None


FetchStep = (FetchStepUrl | FetchStepFilesGlob | FetchStepContainer | FetchStepMqtt
             | FetchStepEthereumLogs | FetchStepFileFeed)

# --- prepare -------------------------------------------------------------------------------


@odf
class PrepStepDecompress:
    UNION: ClassVar[str] = "PrepStep"
    KIND: ClassVar[str] = "Decompress"
    format: CompressionFormat = field(metadata=default_scalar(CompressionFormat.GZIP))
    sub_path: str | None = None


@odf
class PrepStepPipe:
    UNION: ClassVar[str] = "PrepStep"
    KIND: ClassVar[str] = "Pipe"
    command: list[str]


PrepStep = PrepStepDecompress | PrepStepPipe

# --- read ----------------------------------------------------------------------------------
# ``ddlSchema`` holds the older DDL strings (``a INT``), ``schema`` an ODF DataSchema.

_DDL_HINT = {"schema": 'DDL strings such as "id BIGINT" go in ddlSchema; schema takes '
                       "{fields: [{name, type}]}"}


@odf
class ReadStepCsv:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "Csv"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    ddl_schema: list[str] | None = None
    separator: str | None = None
    encoding: str | None = None
    quote: str | None = None
    escape: str | None = None
    header: bool | None = None
    infer_schema: bool | None = None
    null_value: str | None = None
    date_format: str | None = None
    timestamp_format: str | None = None
    schema: DataSchema | None = None


@odf
class ReadStepGeoJson:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "GeoJson"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    ddl_schema: list[str] | None = None
    schema: DataSchema | None = None


@odf
class ReadStepEsriShapefile:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "EsriShapefile"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    ddl_schema: list[str] | None = None
    sub_path: str | None = None
    schema: DataSchema | None = None


@odf
class ReadStepParquet:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "Parquet"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    ddl_schema: list[str] | None = None
    schema: DataSchema | None = None


@odf
class ReadStepJson:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "Json"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    sub_path: str | None = None
    ddl_schema: list[str] | None = None
    date_format: str | None = None
    encoding: str | None = None
    timestamp_format: str | None = None
    schema: DataSchema | None = None


@odf
class ReadStepNdJson:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "NdJson"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    ddl_schema: list[str] | None = None
    date_format: str | None = None
    encoding: str | None = None
    timestamp_format: str | None = None
    schema: DataSchema | None = None


@odf
class ReadStepNdGeoJson:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "NdGeoJson"
    YAML_HINTS: ClassVar[dict[str, str]] = _DDL_HINT
    ddl_schema: list[str] | None = None
    schema: DataSchema | None = None


ReadStep = (
    ReadStepCsv | ReadStepGeoJson | ReadStepEsriShapefile | ReadStepParquet | ReadStepJson
    | ReadStepNdJson | ReadStepNdGeoJson
)

# --- transform -----------------------------------------------------------------------------


@odf
class SqlQueryStep:
    alias: str | None = None
    query: str


@odf
class TemporalTable:
    name: str
    primary_key: list[str]


@odf
class TransformSql:
    UNION: ClassVar[str] = "Transform"
    KIND: ClassVar[str] = "Sql"
    engine: str
    version: str | None = None
    query: str | None = None
    queries: list[SqlQueryStep] | None = None
    temporal_tables: list[TemporalTable] | None = None


# --- merge ---------------------------------------------------------------------------------


@odf
class MergeStrategyAppend:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "Append"


@odf
class MergeStrategyLedger:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "Ledger"
    primary_key: list[str]


@odf
class MergeStrategySnapshot:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "Snapshot"
    primary_key: list[str]
    compare_columns: list[str] | None = None


@odf
class MergeStrategyChangelogStream:
    """Records arrive as a changelog (op column: append, retract, correct-from, correct-to)."""

    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "ChangelogStream"
    primary_key: list[str]


@odf
class MergeStrategyUpsertStream:
    """Records arrive as upserts and deletions of the current state by key."""

    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "UpsertStream"
    primary_key: list[str]


MergeStrategy = (
    MergeStrategyAppend | MergeStrategyLedger | MergeStrategySnapshot
    | MergeStrategyChangelogStream | MergeStrategyUpsertStream
)


@odf
class SourceState:
    """Where a source stopped (e.g. a Kafka offset), so the next poll resumes there."""

    source_name: str
    kind: str
    value: str


UNIONS = {
    "EventTimeSource": (EventTimeSourceFromMetadata, EventTimeSourceFromPath,
                        EventTimeSourceFromSystemTime),
    "SourceCaching": (SourceCachingForever,),
    "FetchStep": (FetchStepUrl, FetchStepFilesGlob, FetchStepContainer, FetchStepMqtt,
                  FetchStepEthereumLogs, FetchStepFileFeed),
    "PrepStep": (PrepStepDecompress, PrepStepPipe),
    "ReadStep": (ReadStepCsv, ReadStepGeoJson, ReadStepEsriShapefile, ReadStepParquet,
                 ReadStepJson, ReadStepNdJson, ReadStepNdGeoJson),
    "Transform": (TransformSql,),
    "MergeStrategy": (MergeStrategyAppend, MergeStrategyLedger, MergeStrategySnapshot,
                      MergeStrategyChangelogStream, MergeStrategyUpsertStream),
}
