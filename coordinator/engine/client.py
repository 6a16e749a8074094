"""The coordinator's side of proto/engine.proto: the engine port (``port.Engine``) over gRPC.

``EngineClient`` speaks to one engine process; ``GrpcEngine`` is that client together with
the process's identity and run folder, the ``Engine`` the transforms are given. Each method
turns the port's request into the proto message of the same name (paths to text, schemas and
tables to Arrow IPC bytes) and the reply into the port's result. Every failure the engine
reports (bad SQL, bad request, a crash inside Spark) and every transport failure is raised as
``EngineError`` with the engine's own message; the wire's ``Error.Kind`` becomes the
``EngineErrorKind`` of the same name.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import grpc
import pyarrow as pa

from ..metadata.objects import (
    DatasetVocabulary,
    EngineIdentity,
    FieldLineage,
    FieldOrigin,
    FieldSource,
    InputWatermarks,
    TransformSql,
)
from ..metadata.timestamps import epoch_nanos, from_epoch_nanos
from ..workspace.fsutil import remove
from . import stubs
from .port import (
    EngineError,
    EngineErrorKind,
    EngineProgress,
    EngineUnavailable,
    ExecuteInput,
    ExecuteRequest,
    ExecuteResult,
    InputSchema,
    LineageRequest,
    MigrateRequest,
    MigrateResult,
    PendingRows,
    PreprocessRequest,
    PreprocessResult,
    ProvenanceRequest,
    ProvenanceResult,
    ReadSourceRequest,
    RowMapping,
    RowMappingRequest,
    SourcePosition,
    ValidateRequest,
    ValidateResult,
    engine_error,
)
from .process import EngineProcess

pb, pb_grpc = stubs.load()


@dataclass(frozen=True)
class EngineInfo:
    engine_name: str
    engine_version: str
    spark_version: str
    spark_master: str
    python_version: str


# Unix socket paths are limited to 107 bytes; a socket deep in a workspace is reached through
# a short symlink instead (connect follows symlinks).
_SOCKET_PATH_LIMIT = 100
_short_links: dict[Path, Path] = {}


def socket_target(socket_path: Path) -> str:
    """The gRPC target of a unix socket, however long its path."""
    if len(str(socket_path)) <= _SOCKET_PATH_LIMIT:
        return f"unix:{socket_path}"
    link = _short_links.get(socket_path)
    if link is None:
        link = Path(tempfile.mkdtemp(prefix="coord-")) / "engine.sock"
        link.symlink_to(socket_path)
        atexit.register(shutil.rmtree, link.parent, True)
        _short_links[socket_path] = link
    return f"unix:{link}"


class EngineClient:
    """A gRPC connection to one engine, over its unix socket (or a ``host:port`` target)."""

    def __init__(self, socket_path: Path | str | None = None, *, target: str | None = None):
        self.socket_path = Path(socket_path) if socket_path is not None else None
        if self.socket_path is not None and target is None:
            target = socket_target(self.socket_path)
        elif target is None or self.socket_path is not None:
            raise ValueError("give exactly one of socket_path or target")
        self._channel = grpc.insecure_channel(target)
        self._stub = pb_grpc.EngineStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def wait_ready(self, timeout: float) -> None:
        """Waits until the engine accepts connections (it listens only once Spark is up)."""
        deadline = time.monotonic() + timeout
        # Until the socket exists, connecting fails and gRPC backs off exponentially; poll
        # the file first so readiness is noticed at once.
        while self.socket_path is not None and not self.socket_path.exists():
            if time.monotonic() > deadline:
                raise EngineUnavailable(
                    f"no engine socket at {self.socket_path} after {timeout:.0f} s"
                )
            time.sleep(0.1)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=max(0.1, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            raise EngineUnavailable(f"engine not ready after {timeout:.0f} s") from None

    def identify(self) -> EngineInfo:
        reply = self._call(self._stub.Identify, pb.IdentifyRequest())
        return EngineInfo(
            engine_name=reply.engine_name,
            engine_version=reply.engine_version,
            spark_version=reply.spark_version,
            spark_master=reply.spark_master,
            python_version=reply.python_version,
        )

    def validate(self, request: ValidateRequest) -> ValidateResult:
        message = pb.ValidateRequest(inputs=[_input_schema(i) for i in request.inputs], **_common(request))
        if request.previous_transform is not None:
            message.previous_transform.CopyFrom(_transform(request.previous_transform))
        reply = self._call(self._stub.ValidateQuery, message)
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return ValidateResult(_read_schema(reply.schema.arrow_schema), reply.schema.ddl)

    def execute(self, request: ExecuteRequest) -> ExecuteResult:
        """Runs one transaction; ``request.on_progress`` receives progress and log lines as
        they come."""
        message = pb.ExecuteRequest(
            inputs=[_execute_input(i) for i in request.inputs],
            prev_checkpoint_dir=_path(request.prev_checkpoint_dir),
            new_checkpoint_dir=str(request.new_checkpoint_dir),
            output_data_path=str(request.output_data_path),
            **_common(request),
        )
        message.system_time.FromNanoseconds(epoch_nanos(request.system_time))
        try:
            for reply in self._stub.ExecuteQuery(message):
                kind = reply.WhichOneof("message")
                if kind == "error":
                    raise _engine_error(reply.error)
                if kind == "result":
                    return _execute_result(reply.result, request.output_data_path)
                if request.on_progress is not None:
                    request.on_progress(_progress(reply))
        except grpc.RpcError as exc:
            raise _transport_error(exc) from None
        raise EngineError(EngineErrorKind.INTERNAL, "the engine ended Execute without a result")

    def migrate(self, request: MigrateRequest) -> MigrateResult:
        reply = self._call(
            self._stub.MigrateQuery,
            pb.MigrateRequest(
                transaction_id=request.transaction_id,
                dataset_id=request.dataset_id,
                prev_transform=_transform(request.prev_transform),
                next_transform=_transform(request.next_transform),
                prev_checkpoint_dir=_path(request.prev_checkpoint_dir),
                new_checkpoint_dir=str(request.new_checkpoint_dir),
            ),
        )
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return MigrateResult(reply.migrated.state_carried, reply.migrated.message)

    def preprocess(self, request: PreprocessRequest) -> PreprocessResult:
        """Runs the query once over ``input_path`` (the view ``input``) and ``inputs`` into
        ``output_path``; returns the number of records and the result's key columns."""
        reply = self._call(
            self._stub.Preprocess,
            pb.PreprocessRequest(
                transaction_id=request.transaction_id, dataset_id=request.dataset_id,
                input_path=_path(request.input_path), transform=_transform(request.transform),
                output_path=str(request.output_path),
                inputs=[_execute_input(i) for i in request.inputs],
            ),
        )
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return PreprocessResult(reply.result.num_records, tuple(reply.result.key_columns))

    def read_source(self, request: ReadSourceRequest) -> list[Path]:
        """Reads one source file into Parquet files under ``output_dir``, in record order."""
        reply = self._call(
            self._stub.ReadSource,
            pb.ReadSourceRequest(
                transaction_id=request.transaction_id, dataset_id=request.dataset_id,
                input_path=str(request.input_path), format=request.format, options=request.options,
                arrow_schema=_schema_bytes(request.schema), output_dir=str(request.output_dir),
                split_bytes=request.split_bytes,
            ),
        )
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return [Path(p) for p in reply.result.parts]

    def derive_field_lineage(self, request: LineageRequest) -> FieldLineage:
        """The column-level lineage of the transform over the inputs' schemas (no data read)."""
        message = pb.LineageRequest(inputs=[_input_schema(i) for i in request.inputs], **_common(request))
        reply = self._call_added("DeriveLineage", message)
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return _field_lineage(reply.lineage)

    def derive_row_mapping(self, request: RowMappingRequest) -> RowMapping:
        """How the output's records come from the inputs' (see proto/engine.proto)."""
        message = pb.LineageRequest(inputs=[_input_schema(i) for i in request.inputs], **_common(request))
        reply = self._call_added("DeriveRowMapping", message)
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        mapping = reply.mapping
        return RowMapping(mapping.operator or None, mapping.input or None, dict(mapping.copies),
                          tuple(mapping.filtered),
                          {name: tuple(read.columns) for name, read in mapping.sources.items()})

    def derive_provenance(self, request: ProvenanceRequest) -> ProvenanceResult:
        """Which input rows make each of ``records`` (see proto/engine.proto)."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, request.records.schema) as writer:
            writer.write_table(request.records)
        message = pb.ProvenanceRequest(
            inputs=[_execute_input(i) for i in request.inputs], records=sink.getvalue().to_pybytes(),
            **_common(request),
        )
        reply = self._call(self._stub.DeriveProvenance, message)
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        derivations = pa.ipc.open_stream(reply.result.derivations).read_all()
        return ProvenanceResult(derivations, reply.result.stateful)

    def _call_added(self, name: str, request):
        """RPC ``name``, which an engine (image) built before it was added does not have."""
        try:
            return getattr(self._stub, name)(request)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise EngineError(EngineErrorKind.UNSUPPORTED, f"this engine build has no {name} "
                                  "(rebuild the engine image)") from None
            raise _transport_error(exc) from None

    def _call(self, method, request):
        try:
            return method(request)
        except grpc.RpcError as exc:
            raise _transport_error(exc) from None


class GrpcEngine(EngineClient):
    """The ``Engine`` port over gRPC: a client of one started engine (either runtime) that
    may write only into its run folder."""

    def __init__(self, process: EngineProcess, run_dir: Path):
        super().__init__(process.socket_path)
        self._identity = process.identity
        self.run_dir = run_dir

    @property
    def identity(self) -> EngineIdentity:
        return self._identity

    def workdir(self, name: str) -> Path:
        path = self.run_dir / name
        remove(path)
        path.mkdir(parents=True)
        return path


# ----- conversions -----------------------------------------------------------------------------


def _common(request: ValidateRequest | ExecuteRequest | ProvenanceRequest | LineageRequest
            | RowMappingRequest) -> dict:
    """The fields of every message that plans or runs a transform of a dataset."""
    return {"transaction_id": request.transaction_id, "dataset_id": request.dataset_id,
            "transform": _transform(request.transform), "vocab": _vocab(request.vocab)}


def _input_schema(i: InputSchema):
    return pb.InputSchema(dataset_id=i.dataset_id, vocab=_vocab(i.vocab),
                          arrow_schema=_schema_bytes(i.schema))


def _field_lineage(result) -> FieldLineage:
    def source(s) -> FieldSource:
        return FieldSource(input=s.input, field=s.field, kind=s.kind, expression=s.expression or None)
    return FieldLineage(
        fields=[FieldOrigin(field=f.field, sources=[source(s) for s in f.sources]) for f in result.fields],
        conditions=[source(s) for s in result.conditions] or None,
    )


def _vocab(vocab: DatasetVocabulary | None):
    vocab = vocab or DatasetVocabulary()
    return pb.Vocabulary(system_time_column=vocab.system_time, event_time_column=vocab.event_time)


def _transform(transform: TransformSql):
    return pb.Transform(
        engine=transform.engine,
        version=transform.version or "",
        queries=[pb.QueryStep(alias=s.alias or "", query=s.query) for s in transform.steps()],
        temporal_tables=[
            pb.TemporalTable(id=t.id, primary_key=t.primary_key) for t in transform.temporal_tables or []
        ],
        input_watermarks=(pb.Transform.RECORDED if transform.input_watermarks is InputWatermarks.RECORDED
                          else pb.Transform.EVENT_TIMES),
    )


def _execute_input(i: ExecuteInput):
    message = pb.ExecuteInput(
        dataset_id=i.dataset_id,
        vocab=_vocab(i.vocab),
        arrow_schema=_schema_bytes(i.schema),
        system_time_interval=i.system_time_interval,
        data_paths=[str(p) for p in i.data_paths],
    )
    if i.removal is not None:
        message.observation_column, message.removed_value = i.removal
    for system_time, event_time in i.explicit_watermarks:
        watermark = message.explicit_watermarks.add()
        watermark.system_time.FromNanoseconds(epoch_nanos(system_time))
        watermark.event_time.FromNanoseconds(epoch_nanos(event_time))
    return message


def _execute_result(result, output_path: Path) -> ExecuteResult:
    return ExecuteResult(
        num_records=result.num_records,
        output_watermark=(
            from_epoch_nanos(result.output_watermark.ToNanoseconds())
            if result.HasField("output_watermark") else None
        ),
        schema=_read_schema(result.schema.arrow_schema),
        ddl=result.schema.ddl,
        output_path=output_path if result.num_records else None,
        late_rows=result.late_rows,
        pending_rows=tuple(
            PendingRows(p.input, p.rows, tuple(p.waiting_for),
                        from_epoch_nanos(p.watermark.ToNanoseconds()) if p.HasField("watermark") else None)
            for p in result.pending_rows),
    )


def _progress(reply) -> EngineProgress:
    if reply.WhichOneof("message") == "log":
        return EngineProgress("log", reply.log.message)
    p = reply.progress
    if p.stage == "batch":
        watermark = f", watermark {p.watermark}" if p.watermark else ""
        return EngineProgress("batch", f"batch {p.batch_id}: {p.input_rows} input rows{watermark}")
    return EngineProgress(p.stage, p.stage)


def _engine_error(error) -> EngineError:
    position = None
    if error.HasField("position"):
        p = error.position
        position = SourcePosition(p.step, p.alias, p.line, p.column, p.fragment)
    return engine_error(EngineErrorKind[pb.Error.Kind.Name(error.kind)], error.message, position)


def _transport_error(exc: grpc.RpcError) -> EngineError:
    return EngineUnavailable(f"engine call failed ({exc.code().name}): {exc.details()}")


def _path(path: Path | None) -> str:
    return str(path) if path else ""


def _schema_bytes(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes()


def _read_schema(data: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(data))
