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
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from datetime import datetime
from typing import ClassVar, dataclass_transform

from .timestamps import TimeInterval


class SourceOrdering(enum.Enum):
    BY_EVENT_TIME = ("byEventTime", 0)
    BY_NAME = ("byName", 1)


class CompressionFormat(enum.Enum):
    GZIP = ("gzip", 0)
    ZIP = ("zip", 1)


class SuccessMarker(enum.Enum):
    """*Extension*: what a File Feed update's ``_SUCCESS`` holds (``FetchStepFileFeed``)."""

    COUNT = ("count", 0)  # the number of data files of the update (the File Feed convention)
    HADOOP = ("hadoop", 1)  # anything, often nothing (Hadoop/Spark jobs): presence alone counts


@dataclass_transform(kw_only_default=True, frozen_default=True)
def odf(cls):
    """An ODF object: keyword-only, so fields can be declared in schema order whatever their
    defaults; frozen, since a sealed block is content-addressed (change one with
    ``dataclasses.replace``).

    ``dataclass`` gathers the fields; the methods it would compile for each class (~0.45 ms
    a class, ~50 ms of every command that reads a chain) are shared by all instead: equality,
    hash and repr by the fields in order, and the frozen ``__setattr__``/``__delattr__``.
    Only ``__init__`` is compiled per class (``_init_of``), which halves that time.
    A class without a docstring gets its name as one: ``dataclass`` would otherwise compute
    its signature for it (~0.1 ms a class).
    """
    cls.__doc__ = cls.__doc__ or cls.__name__
    cls = dataclass(kw_only=True, init=False, eq=False, repr=False)(cls)
    cls.__init__ = _init_of(cls)
    cls.__eq__, cls.__hash__, cls.__repr__ = _odf_eq, _odf_hash, _odf_repr
    cls.__setattr__, cls.__delattr__ = _odf_frozen, _odf_frozen
    return cls


def _init_of(cls):
    """A keyword-only ``__init__`` setting each field as a frozen dataclass's does (the
    fields' defaults are immutable values: no factories)."""
    params, body, defaults = [], [], {"_set": object.__setattr__}
    for f in fields(cls):
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: an ODF object's defaults are values")
        if f.default is MISSING:
            params.append(f.name)
        else:
            params.append(f"{f.name}=_default_{f.name}")
            defaults[f"_default_{f.name}"] = f.default
        body.append(f"    _set(self, {f.name!r}, {f.name})\n")
    star = "*, " if params else ""
    exec(f"def __init__(self, {star}{', '.join(params)}):\n{''.join(body) or '    pass'}\n",
         defaults)
    init = defaults["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _odf_frozen(self, name, *value):
    raise FrozenInstanceError(f"cannot {'assign to' if value else 'delete'} field {name!r}")


def _odf_values(obj) -> tuple:
    return tuple(getattr(obj, f.name) for f in fields(obj))


def _odf_eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _odf_values(self) == _odf_values(other)


def _odf_hash(self) -> int:
    return hash(_odf_values(self))


def _odf_repr(self) -> str:
    args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
    return f"{type(self).__qualname__}({args})"


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
    timestamp_format: str | None = None


@odf
class SourceCachingForever:
    UNION: ClassVar[str] = "SourceCaching"
    KIND: ClassVar[str] = "forever"


EventTimeSource = EventTimeSourceFromMetadata | EventTimeSourceFromPath
SourceCaching = SourceCachingForever

# --- fetch ---------------------------------------------------------------------------------


@odf
class FetchStepUrl:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "url"
    url: str
    event_time: EventTimeSource | None = None
    cache: SourceCaching | None = None


@odf
class FetchStepFilesGlob:
    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "filesGlob"
    path: str
    event_time: EventTimeSource | None = None
    cache: SourceCaching | None = None
    order: SourceOrdering | None = None


@odf
class FetchStepFileFeed:
    """*Extension* (union tag 128): the updates of a File Feed, one block per update
    (``schemas/EXTENSIONS.md``, docs/feeds.md)."""

    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "fileFeed"
    TAG: ClassVar[int] = 128  # an extension's tag: far from the ones ODF gives its own variants
    url: str
    partitions: int | None = None  # path levels between the feed root and its updates
    success_marker: SuccessMarker | None = None  # None: count


@odf
class EnvVar:
    name: str
    value: str | None = None  # None: the coordinator's environment variable of that name


@odf
class FetchStepContainer:
    """ODF's container fetch (``ingest/fetch_container.py``), run for current-ODF (0.39)
    roots only: not in ``UNIONS``, so a 0.18 block or manifest holding one is still refused
    by name (``LATER_ODF_TAGS``)."""

    UNION: ClassVar[str] = "FetchStep"
    KIND: ClassVar[str] = "container"
    image: str
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None


FetchStep = FetchStepUrl | FetchStepFilesGlob | FetchStepFileFeed | FetchStepContainer

# --- prepare -------------------------------------------------------------------------------


@odf
class PrepStepDecompress:
    UNION: ClassVar[str] = "PrepStep"
    KIND: ClassVar[str] = "decompress"
    format: CompressionFormat = field(metadata=default_scalar(CompressionFormat.GZIP))
    sub_path: str | None = None


@odf
class PrepStepPipe:
    UNION: ClassVar[str] = "PrepStep"
    KIND: ClassVar[str] = "pipe"
    command: list[str]


PrepStep = PrepStepDecompress | PrepStepPipe

# --- read ----------------------------------------------------------------------------------


@odf
class ReadStepCsv:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "csv"
    schema: list[str] | None = None
    separator: str | None = None
    encoding: str | None = None
    quote: str | None = None
    escape: str | None = None
    comment: str | None = None
    header: bool | None = None
    enforce_schema: bool | None = None
    infer_schema: bool | None = None
    ignore_leading_white_space: bool | None = None
    ignore_trailing_white_space: bool | None = None
    null_value: str | None = None
    empty_value: str | None = None
    nan_value: str | None = None
    positive_inf: str | None = None
    negative_inf: str | None = None
    date_format: str | None = None
    timestamp_format: str | None = None
    multi_line: bool | None = None


@odf
class ReadStepJsonLines:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "jsonLines"
    schema: list[str] | None = None
    date_format: str | None = None
    encoding: str | None = None
    multi_line: bool | None = None
    primitives_as_string: bool | None = None
    timestamp_format: str | None = None


@odf
class ReadStepGeoJson:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "geoJson"
    schema: list[str] | None = None


@odf
class ReadStepEsriShapefile:
    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "esriShapefile"
    schema: list[str] | None = None
    sub_path: str | None = None


@odf
class ReadStepParquet:
    """*Extension* (union tag 5, as in later ODF versions): read a Parquet file."""

    UNION: ClassVar[str] = "ReadStep"
    KIND: ClassVar[str] = "parquet"
    schema: list[str] | None = None


ReadStep = (
    ReadStepCsv | ReadStepJsonLines | ReadStepGeoJson | ReadStepEsriShapefile | ReadStepParquet
)

# --- transform -----------------------------------------------------------------------------


@odf
class SqlQueryStep:
    alias: str | None = None
    query: str


@odf
class TemporalTable:
    id: str
    primary_key: list[str]


@odf
class TransformSql:
    UNION: ClassVar[str] = "Transform"
    KIND: ClassVar[str] = "sql"
    engine: str
    version: str | None = None
    query: str | None = None
    queries: list[SqlQueryStep] | None = None
    temporal_tables: list[TemporalTable] | None = None
    late_rows: LateRows | None = None  # extension: absent means drop (and report)
    # extension: absent means EVENT_TIMES, what transforms added before it keep (coord add
    # writes RECORDED for a new derivative)
    input_watermarks: InputWatermarks | None = None

    def steps(self) -> list[SqlQueryStep]:
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
    primary_key: list[str]


@odf
class MergeStrategySnapshot:
    UNION: ClassVar[str] = "MergeStrategy"
    KIND: ClassVar[str] = "snapshot"
    primary_key: list[str]
    compare_columns: list[str] | None = None
    observation_column: str | None = None
    obsv_added: str | None = None
    obsv_changed: str | None = None
    obsv_removed: str | None = None


MergeStrategy = MergeStrategyAppend | MergeStrategyLedger | MergeStrategySnapshot

# --- sources, vocabulary, snapshot -----------------------------------------------------------


@odf
class DatasetSourceRoot:
    UNION: ClassVar[str] = "DatasetSource"
    KIND: ClassVar[str] = "root"
    fetch: FetchStep
    prepare: list[PrepStep] | None = None
    read: ReadStep
    preprocess: Transform | None = None
    merge: MergeStrategy


@odf
class DatasetSourceDerivative:
    UNION: ClassVar[str] = "DatasetSource"
    KIND: ClassVar[str] = "derivative"
    inputs: list[str]
    transform: Transform


DatasetSource = DatasetSourceRoot | DatasetSourceDerivative


@odf
class DatasetVocabulary:
    system_time_column: str | None = None
    event_time_column: str | None = None

    @property
    def system_time(self) -> str:
        return self.system_time_column or "system_time"

    @property
    def event_time(self) -> str:
        return self.event_time_column or "event_time"


@odf
class DatasetSnapshot:
    id: str
    source: DatasetSource | None  # None only for a current-ODF root fed by push sources (odf39.adapt)
    vocab: DatasetVocabulary | None = None


# --- blocks ------------------------------------------------------------------------------------


@odf
class DataSlice:
    hash: bytes
    interval: TimeInterval
    num_records: int = field(default=0, metadata=default_scalar(0))
    physical_hash: bytes | None = None  # extension: SHA3-256 of the Parquet file bytes


@odf
class EngineIdentity:
    """Extension: which engine produced a block's output (spec: Engine Versioning)."""

    runtime: str  # "container" or "sandbox"
    version: str | None = None  # engine package version
    spark_version: str | None = None
    image_digest: str | None = None  # container runtime
    files_hash: str | None = None  # sandbox runtime: SHA3-256 over the engine's files
    spark_master: str | None = None
    network_isolated: bool | None = None


@odf
class FieldSource:
    """Extension: one input column that an output column (or, under ``conditions``, every
    output row) depends on, and how."""

    input: str  # the input as named in the transform's ``inputs``
    field: str
    kind: str  # a FieldUse value: copy, transform, aggregate, filter, join, groupBy, window
    expression: str | None = None  # the SQL of the output expression, for display


@odf
class FieldOrigin:
    """Extension: where one output column's values come from."""

    field: str
    sources: list[FieldSource]


@odf
class FieldLineage:
    """Extension: the column-level lineage of a derivative's transform over its input schemas
    (see EXTENSIONS.md). A function of the query and the input schemas, both in the chains."""

    fields: list[FieldOrigin]
    conditions: list[FieldSource] | None = None  # used only to filter, join or group rows


class LateRows(enum.Enum):
    """*Extension*: what a pull does when the step dropped rows as late (``TransformSql.lateRows``)."""

    DROP = ("drop", 0)  # commit without them, and report how many (the default)
    FAIL = ("fail", 1)  # fail the pull, commit nothing
    # recompute the step, so the late rows correct the results: current ODF only, where the
    # policy is kept beside the chain (``store.late_rows``); a 0.18 chain never holds it
    CORRECT = ("correct", 2)


class InputWatermarks(enum.Enum):
    """*Extension*: where a derivative's input watermarks come from (``TransformSql.inputWatermarks``)."""

    EVENT_TIMES = ("eventTimes", 0)  # the latest of its recorded watermarks and its event times
    RECORDED = ("recorded", 1)  # its recorded watermarks alone: ODF's rule


class FieldUse(enum.Enum):
    """How an output depends on an input column (``FieldSource.kind``)."""

    COPY = "copy"  # the value passes unchanged (renames included)
    TRANSFORM = "transform"  # computed from it by a row-level expression
    AGGREGATE = "aggregate"  # an aggregate (or window function) over it
    FILTER = "filter"  # decides which rows pass a WHERE/HAVING
    JOIN = "join"  # in a join condition
    GROUP_BY = "groupBy"  # a grouping key
    WINDOW = "window"  # the event-time window or window partition/order


@odf
class MetadataBlock:
    block_hash: bytes | None = None
    prev_block_hash: bytes | None = None
    system_time: datetime
    output_slice: DataSlice | None = None
    output_watermark: datetime | None = None
    input_slices: list[DataSlice] | None = None
    source: DatasetSource | None = None
    vocab: DatasetVocabulary | None = None
    engine: EngineIdentity | None = None  # extension
    compatible_engine: EngineIdentity | None = None  # extension: spec "Engine Deprecation"
    field_lineage: FieldLineage | None = None  # extension: column-level lineage
    late_rows: int | None = None  # extension: rows the step dropped as late (absent when none)



UNIONS = {
    "EventTimeSource": (EventTimeSourceFromMetadata, EventTimeSourceFromPath),
    "SourceCaching": (SourceCachingForever,),
    "FetchStep": (FetchStepUrl, FetchStepFilesGlob, FetchStepFileFeed),
    "PrepStep": (PrepStepDecompress, PrepStepPipe),
    "ReadStep": (ReadStepCsv, ReadStepJsonLines, ReadStepGeoJson, ReadStepEsriShapefile,
                 ReadStepParquet),
    "Transform": (TransformSql,),
    "MergeStrategy": (MergeStrategyAppend, MergeStrategyLedger, MergeStrategySnapshot),
    "DatasetSource": (DatasetSourceRoot, DatasetSourceDerivative),
}

# Union tags later ODF versions give variants this coordinator does not read: a block using one
# is refused by name rather than decoded as something else.
LATER_ODF_TAGS = {"FetchStep": {3: "container", 4: "mqtt", 5: "ethereumLogs"}}

# Top-level objects a manifest may wrap (``kind:`` of the manifest).
MANIFEST_KINDS = {"DatasetSnapshot": DatasetSnapshot, "MetadataBlock": MetadataBlock}
