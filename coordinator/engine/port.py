"""The engine port: what transforms need of an engine, whatever runs it.

``Engine`` is the operations of proto/engine.proto as the coordinator uses them, with typed
requests and results. ``client.GrpcEngine`` implements it over gRPC for both runtimes
(sandbox, container); tests implement it with DuckDB (tests/fake_engine.py). Transforms only
ever see this protocol, and get an engine from ``factory.open_engine``.

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


@dataclass(frozen=True)
class ProvenanceResult:
    # one row per input row of a derivation: record (the caller's key), derivation (the
    # replayed row equal to the record), input (dataset id), file (data file name), row
    derivations: pa.Table
    stateful: bool  # the plan joins or aggregates: a derivation may reach into older slices


@dataclass(frozen=True)
class ExecuteRequest:
    transaction_id: str
    dataset_id: str  # the output dataset
    inputs: list[ExecuteInput]  # in the order of the dataset's inputs
    transform: TransformSql
    vocab: DatasetVocabulary  # the output dataset's vocabulary
    new_checkpoint: Path  # absent or empty; the engine fills it
    output_path: Path  # where the output slice goes (not created when there are no records)
    system_time: datetime  # stamped into the output's system_time column
    prev_checkpoint: Path | None = None  # read only


@dataclass(frozen=True)
class ExecuteResult:
    num_records: int
    output_watermark: datetime | None  # None when unknown
    schema: pa.Schema
    ddl: str
    output_path: Path | None  # None when num_records == 0


@dataclass(frozen=True)
class ValidateResult:
    schema: pa.Schema  # of the output slices: system_time, event_time, data columns
    ddl: str


@dataclass(frozen=True)
class MigrateResult:
    state_carried: bool  # False: the new query starts with empty streaming state
    message: str


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


class EngineError(CoordError):
    """A failure reported by the engine or on the way to it.

    ``kind`` is INVALID_QUERY, INVALID_REQUEST, UNSUPPORTED, EXECUTION, FORBIDDEN (the SQL
    policy refused the query), INTERNAL, or UNAVAILABLE (the engine could not be reached)."""

    def __init__(self, kind: str, message: str, position: SourcePosition | None = None):
        super().__init__(message)
        self.kind = kind
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
        super().__init__("UNAVAILABLE", message)


class EngineQueryError(EngineError, Invalid):
    """The engine refused the SQL: it is wrong (INVALID_QUERY) or its policy forbids it (FORBIDDEN)."""


def engine_error(kind: str, message: str, position: SourcePosition | None = None) -> EngineError:
    """The error for an engine's answer of ``kind``, in the category that kind is."""
    if kind == "UNAVAILABLE":
        return EngineUnavailable(message)
    cls = EngineQueryError if kind in ("INVALID_QUERY", "FORBIDDEN") else EngineError
    return cls(kind, message, position)


class Engine(Protocol):
    """One running engine, for the length of a command (see the module docstring)."""

    @property
    def identity(self) -> EngineIdentity:
        """Goes into every block this engine produces."""

    def workdir(self, name: str) -> Path:
        """A fresh, empty folder the engine may write: one transaction's output and checkpoint."""

    def validate(
        self, dataset_id: str, inputs: list[InputSchema], transform: TransformSql,
        vocab: DatasetVocabulary, previous_transform: TransformSql | None = None,
        transaction_id: str = "",
    ) -> ValidateResult:
        """Plans ``transform`` over inputs of these schemas; the output schema, or EngineError."""

    def execute(
        self, request: ExecuteRequest, on_progress: Callable[[EngineProgress], None] | None = None
    ) -> ExecuteResult:
        """Runs one transaction over the inputs' new slices, resuming from the previous
        checkpoint; ``on_progress`` receives progress and log lines as they come."""

    def migrate(
        self, transaction_id: str, dataset_id: str, prev_transform: TransformSql,
        next_transform: TransformSql, prev_checkpoint: Path | None, new_checkpoint: Path,
    ) -> MigrateResult:
        """A checkpoint for ``next_transform`` from one of ``prev_transform``."""

    def preprocess(
        self, dataset_id: str, input_path: Path, transform: TransformSql, output_path: Path,
        transaction_id: str = "",
    ) -> int:
        """Runs a root's preprocess query over ``input_path`` (the view ``input``) into
        ``output_path``; returns the number of records."""

    def read_source(
        self, dataset_id: str, input_path: Path, format: str, options: dict[str, str],
        schema: pa.Schema, output_dir: Path, split_bytes: int = 0, transaction_id: str = "",
    ) -> list[Path]:
        """Reads one source file with the engine's reader (``format``: csv, jsonLines or
        parquet; ``options`` by Spark's names) typed as ``schema``, into Parquet files under
        ``output_dir``; returns them in the file's record order. EngineError EXECUTION for a
        malformed record or a value that does not fit its type."""

    def derive_field_lineage(
        self, dataset_id: str, inputs: list[InputSchema], transform: TransformSql,
        vocab: DatasetVocabulary, transaction_id: str = "",
    ) -> FieldLineage:
        """The column-level lineage of ``transform`` over the inputs' schemas (no data read);
        EngineError UNSUPPORTED for a plan it cannot trace."""

    def derive_provenance(
        self, dataset_id: str, inputs: list[ExecuteInput], transform: TransformSql,
        vocab: DatasetVocabulary, records: pa.Table, transaction_id: str = "",
    ) -> ProvenanceResult:
        """Replays ``transform`` over the inputs' slices and answers which input rows make each
        of ``records`` (the query's columns and ``__odf_record``); EngineError UNSUPPORTED for
        a plan shape it cannot trace."""

    def close(self) -> None:
        """Releases the connection (the factory stops the engine itself)."""
