"""The engine port: what transforms need of an engine, whatever runs it.

``Engine`` is the operations of proto/engine.proto as the coordinator uses them: one method
per RPC, taking one frozen request named and shaped as the proto's message (``ValidateRequest``,
``ExecuteRequest``, ``MigrateRequest``, ``PreprocessRequest``, ``ReadSourceRequest``,
``ProvenanceRequest``, ``LineageRequest``, ``RowMappingRequest``: the wire's ``LineageRequest``;
every field by name, ``transaction_id`` always given) and returning a typed result. The fields
hold Python values where the wire holds text or bytes (a ``Path`` for a path, ``pa.Schema`` as
``schema`` for an ``arrow_schema``, None for ""); ``ExecuteRequest.on_progress`` is the one
field that is not sent. Every failure is an ``EngineError`` whose ``kind`` is an
``EngineErrorKind``. ``client.GrpcEngine`` implements the port over gRPC for both runtimes
(sandbox, container) and does the conversions; tests implement it with DuckDB
(tests/support/fake_engine.py). Transforms only ever see this protocol, and get an engine from
``factory.open_engine``.

Invariants every implementation keeps (the real engine's, see docs/architecture.md):
- an engine writes only into folders it hands out (``workdir``) and the paths a request names
  there: the output slice and the new checkpoint; the previous checkpoint is read only;
- the output slice is one Parquet file: ``system_time`` (the request's), the event time column,
  then the data columns, rows ordered by event time; none is written without records;
- the output watermark never passes the least input watermark and never moves back;
- every failure is an ``EngineError`` with the engine's own message.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import CoordError, Invalid, Unavailable
from ..metadata.objects import DatasetVocabulary, EngineIdentity, FieldLineage, TransformSql

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class InputSchema:
    """An input dataset as Validate needs it."""

    dataset_id: str  # also the SQL view name: SELECT ... FROM `com.example.orders`
    vocab: DatasetVocabulary
    schema: pa.Schema  # schema of its data files


@dataclass(frozen=True)
class ExecuteInput:
    """An input dataset's new, unprocessed part for one Execute call."""

    dataset_id: str
    vocab: DatasetVocabulary
    schema: pa.Schema
    data_paths: list[Path]  # Parquet slices in chain order, oldest first
    explicit_watermarks: list[tuple[datetime, datetime]] = field(default_factory=list)  # (system, event)
    system_time_interval: str = "()"  # the spec's text syntax, e.g. "(a, b]"
    # a snapshot merge's (observation column, value of a removed key): a temporal table of
    # this input drops the key from then on; None for other inputs
    removal: tuple[str, str] | None = None


# ----- requests: one per RPC, as proto/engine.proto's messages --------------------------------


@dataclass(frozen=True, kw_only=True)
class _OverSchemas:
    """What Validate and DeriveLineage share: a transform planned over the inputs' schemas,
    no data read, nothing changed."""

    transaction_id: str  # for logs
    dataset_id: str  # the output dataset
    inputs: list[InputSchema]  # every input of the transform
    transform: TransformSql
    vocab: DatasetVocabulary  # the output dataset's vocabulary


@dataclass(frozen=True, kw_only=True)
class ValidateRequest(_OverSchemas):
    previous_transform: TransformSql | None = None  # the current one, when changing a query


@dataclass(frozen=True, kw_only=True)
class ExecuteRequest:
    transaction_id: str  # the same transaction over the same inputs and checkpoint: the same output
    dataset_id: str  # the output dataset
    inputs: list[ExecuteInput]  # in the order of the dataset's inputs
    transform: TransformSql
    vocab: DatasetVocabulary  # the output dataset's vocabulary
    prev_checkpoint_dir: Path | None = None  # read only; None on the first run
    new_checkpoint_dir: Path  # absent or empty; the engine fills it
    output_data_path: Path  # where the output slice goes (not created when there are no records)
    system_time: datetime  # stamped into the output's system_time column
    # not sent: receives the progress and log lines the engine streams while it runs
    on_progress: Callable[[EngineProgress], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class MigrateRequest:
    transaction_id: str
    dataset_id: str  # the output dataset
    prev_transform: TransformSql  # the transform the previous checkpoint belongs to
    next_transform: TransformSql  # the transform that runs from now on
    prev_checkpoint_dir: Path | None  # read only; None: there is none
    new_checkpoint_dir: Path  # absent or empty; the engine fills it


@dataclass(frozen=True, kw_only=True)
class PreprocessRequest:
    """A query once as a batch: a root's preprocess over ``input_path``, or a derivative's
    query over its inputs (``inputs``, each one Parquet file, a view by its ``dataset_id``: a
    streamed input's current rows, a temporal table's history of versions, its removals
    marked by ``removal``)."""

    transaction_id: str
    dataset_id: str  # the dataset (for logs)
    input_path: Path | None  # one Parquet file, read as the view ``input``; read only
    transform: TransformSql  # the root's preprocess query, or the derivative's
    output_path: Path  # where the result goes: one Parquet file
    inputs: list[ExecuteInput] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ReadSourceRequest:
    transaction_id: str
    dataset_id: str  # the root dataset
    input_path: Path  # the source file; read only
    format: str  # the read step's kind: csv, jsonLines or parquet
    options: dict[str, str]  # the read step's options, by Spark's names
    schema: pa.Schema  # the records' columns and types (the wire's arrow_schema)
    output_dir: Path  # an empty folder for the Parquet files
    split_bytes: int = 0  # read in splits of about this many bytes (0: Spark's default)


@dataclass(frozen=True, kw_only=True)
class ProvenanceRequest:
    transaction_id: str
    dataset_id: str  # the output dataset
    transform: TransformSql  # the query in force when the records were produced
    inputs: list[ExecuteInput]  # data_paths: every slice of the input the replay reads
    vocab: DatasetVocabulary  # the output's vocabulary
    records: pa.Table  # the records to explain: the query's columns and ``__odf_record``


@dataclass(frozen=True, kw_only=True)
class LineageRequest(_OverSchemas):
    pass


@dataclass(frozen=True, kw_only=True)
class RowMappingRequest(_OverSchemas):
    """DeriveRowMapping's request (on the wire a ``LineageRequest``: the same fields)."""


# ----- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProvenanceResult:
    # one row per input row of a derivation: record (the caller's key), derivation (the
    # replayed row equal to the record), input (dataset id), file (data file name), row
    derivations: pa.Table
    stateful: bool  # the plan joins or aggregates: a derivation may reach into older slices


@dataclass(frozen=True)
class PendingRows:
    """An input's rows the engine holds back in its checkpoint after a call (proto:
    ``PendingRows``): a temporal join's events whose time the tables' watermark has not reached."""

    input: str  # the input's name in the request
    rows: int
    waiting_for: tuple[str, ...]  # the temporal tables whose watermark holds them
    watermark: datetime | None  # that watermark (None: one of them has none yet)


@dataclass(frozen=True)
class ExecuteResult:
    num_records: int
    output_watermark: datetime | None  # None when unknown
    schema: pa.Schema
    ddl: str
    output_path: Path | None  # None when num_records == 0
    late_rows: int = 0  # rows a stateful operator dropped for arriving behind its watermark
    pending_rows: tuple[PendingRows, ...] = ()  # held back after the call, by input


@dataclass(frozen=True)
class RowMapping:
    """How the output's records come from the inputs' records (proto: ``RowMapping``)."""

    operator: str | None  # the first operator that is not a projection, filter or alias; None: none is
    input: str | None  # the one input (its view name) a row-wise plan reads; None: none
    copies: dict[str, str]  # output column -> the input column it is unchanged (row-wise plans)
    filtered: tuple[str, ...] = ()  # the input columns the filters read (row-wise plans)
    # output column -> the input columns its value is computed from (row-wise plans)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ValidateResult:
    schema: pa.Schema  # of the output slices: system_time, event_time, data columns
    ddl: str


@dataclass(frozen=True)
class MigrateResult:
    state_carried: bool  # False: the new query starts with empty streaming state
    message: str


@dataclass(frozen=True)
class PreprocessResult:
    num_records: int
    # the columns identifying a row when the query ends in an aggregation (its grouping keys
    # as output), else empty: a recomputed step writes a row whose key stays as a correction
    key_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineProgress:
    """A progress report or log line from a running Execute."""

    stage: str  # "log", "batch", "writing"
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SourcePosition:
    step: int  # query step index (0-based)
    alias: str  # the step's alias ("" for the output step)
    line: int  # 1-based; 0 = unknown
    column: int  # 0-based, Spark's "pos"; -1 = unknown
    fragment: str


class EngineErrorKind(StrEnum):
    """What failed: the kinds of proto/engine.proto's ``Error``, and UNAVAILABLE. Each prints
    as its name (``str(EngineErrorKind.UNSUPPORTED) == "UNSUPPORTED"``)."""

    INTERNAL = "INTERNAL"  # the engine failed (a bug or the machine)
    INVALID_QUERY = "INVALID_QUERY"  # the SQL is wrong: syntax, names, types, streaming use
    INVALID_REQUEST = "INVALID_REQUEST"  # the request is inconsistent (bad path, used checkpoint)
    UNSUPPORTED = "UNSUPPORTED"  # a feature this engine does not implement
    EXECUTION = "EXECUTION"  # the query failed while running over the data
    FORBIDDEN = "FORBIDDEN"  # the SQL policy refused the query
    UNAVAILABLE = "UNAVAILABLE"  # the engine could not be reached (not on the wire)


class EngineError(CoordError):
    """A failure reported by the engine or on the way to it; ``kind`` says which."""

    def __init__(self, kind: EngineErrorKind, message: str, position: SourcePosition | None = None):
        super().__init__(message)
        self.kind = EngineErrorKind(kind)
        self.message = message
        self.position = position

    def __str__(self) -> str:
        where = ""
        if self.position is not None and self.position.line:
            step = f"step {self.position.step}" + (f" ({self.position.alias})" if self.position.alias else "")
            where = f" [{step}, line {self.position.line}, column {self.position.column}]"
        return f"{self.kind}{where}: {self.message}"


class EngineUnavailable(EngineError, Unavailable):
    """The engine could not be reached (kind UNAVAILABLE)."""

    def __init__(self, message: str):
        super().__init__(EngineErrorKind.UNAVAILABLE, message)


class EngineQueryError(EngineError, Invalid):
    """The engine refused the SQL: it is wrong (INVALID_QUERY) or its policy forbids it (FORBIDDEN)."""


def engine_error(kind: EngineErrorKind, message: str, position: SourcePosition | None = None) -> EngineError:
    """The error for an engine's answer of ``kind``, in the category that kind is."""
    if kind is EngineErrorKind.UNAVAILABLE:
        return EngineUnavailable(message)
    query = (EngineErrorKind.INVALID_QUERY, EngineErrorKind.FORBIDDEN)
    cls = EngineQueryError if kind in query else EngineError
    return cls(kind, message, position)


class Engine(Protocol):
    """One running engine, for the length of a command (see the module docstring)."""

    @property
    def identity(self) -> EngineIdentity:
        """Goes into every block this engine produces."""

    def workdir(self, name: str) -> Path:
        """A fresh, empty folder the engine may write: one transaction's output and checkpoint."""

    def validate(self, request: ValidateRequest) -> ValidateResult:
        """Plans the transform over inputs of these schemas; the output schema, or EngineError."""

    def execute(self, request: ExecuteRequest) -> ExecuteResult:
        """Runs one transaction over the inputs' new slices, resuming from the previous
        checkpoint; ``request.on_progress`` receives progress and log lines as they come."""

    def migrate(self, request: MigrateRequest) -> MigrateResult:
        """A checkpoint for ``next_transform`` from one of ``prev_transform``."""

    def preprocess(self, request: PreprocessRequest) -> PreprocessResult:
        """Runs the query once over ``input_path`` (the view ``input``) and ``inputs`` into
        ``output_path``; returns the number of records and the result's key columns."""

    def read_source(self, request: ReadSourceRequest) -> list[Path]:
        """Reads one source file with the engine's reader (``format``: csv, jsonLines or
        parquet; ``options`` by Spark's names) typed as ``schema``, into Parquet files under
        ``output_dir``; returns them in the file's record order. EngineError EXECUTION for a
        malformed record or a value that does not fit its type."""

    def derive_field_lineage(self, request: LineageRequest) -> FieldLineage:
        """The column-level lineage of the transform over the inputs' schemas (no data read);
        EngineError UNSUPPORTED for a plan it cannot trace."""

    def derive_row_mapping(self, request: RowMappingRequest) -> RowMapping:
        """Whether the transform's plan is only projections, filters and aliases over one input
        (else the first operator that is not) and which output columns copy an input column
        unchanged, over the inputs' schemas (no data read)."""

    def derive_provenance(self, request: ProvenanceRequest) -> ProvenanceResult:
        """Replays the transform over the inputs' slices and answers which input rows make
        each of ``records`` (the query's columns and ``__odf_record``); EngineError
        UNSUPPORTED for a plan shape it cannot trace."""

    def close(self) -> None:
        """Releases the connection (the factory stops the engine itself)."""
