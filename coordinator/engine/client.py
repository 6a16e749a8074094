"""The coordinator's side of proto/engine.proto: the engine port (``port.Engine``) over gRPC.

``EngineClient`` speaks to one engine process; ``GrpcEngine`` is that client together with
the process's identity and run folder, the ``Engine`` the transforms are given. Every failure
the engine reports (bad SQL, bad request, a crash inside Spark) and every transport failure
is raised as ``EngineError`` with the engine's own message.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Callable
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
    TransformSql,
)
from ..metadata.timestamps import epoch_nanos, from_epoch_nanos
from ..workspace.fsutil import remove
from . import stubs
from .port import (
    EngineError,
    EngineProgress,
    EngineUnavailable,
    ExecuteInput,
    ExecuteRequest,
    ExecuteResult,
    InputSchema,
    MigrateResult,
    ProvenanceResult,
    SourcePosition,
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

    def validate(
        self,
        dataset_id: str,
        inputs: list[InputSchema],
        transform: TransformSql,
        vocab: DatasetVocabulary,
        previous_transform: TransformSql | None = None,
        transaction_id: str = "",
    ) -> ValidateResult:
        request = pb.ValidateRequest(
            transaction_id=transaction_id,
            dataset_id=dataset_id,
            inputs=[_input_schema(i) for i in inputs],
            transform=_transform(transform),
            vocab=_vocab(vocab),
        )
        if previous_transform is not None:
            request.previous_transform.CopyFrom(_transform(previous_transform))
        reply = self._call(self._stub.ValidateQuery, request)
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return ValidateResult(_read_schema(reply.schema.arrow_schema), reply.schema.ddl)

    def execute(
        self, request: ExecuteRequest, on_progress: Callable[[EngineProgress], None] | None = None
    ) -> ExecuteResult:
        """Runs one transaction; ``on_progress`` receives progress and log lines as they come."""
        message = pb.ExecuteRequest(
            transaction_id=request.transaction_id,
            dataset_id=request.dataset_id,
            inputs=[_execute_input(i) for i in request.inputs],
            transform=_transform(request.transform),
            vocab=_vocab(request.vocab),
            prev_checkpoint_dir=str(request.prev_checkpoint) if request.prev_checkpoint else "",
            new_checkpoint_dir=str(request.new_checkpoint),
            output_data_path=str(request.output_path),
        )
        message.system_time.FromNanoseconds(epoch_nanos(request.system_time))
        try:
            for reply in self._stub.ExecuteQuery(message):
                kind = reply.WhichOneof("message")
                if kind == "error":
                    raise _engine_error(reply.error)
                if kind == "result":
                    return _execute_result(reply.result, request.output_path)
                if on_progress is not None:
                    on_progress(_progress(reply))
        except grpc.RpcError as exc:
            raise _transport_error(exc) from None
        raise EngineError("INTERNAL", "the engine ended Execute without a result")

    def migrate(
        self,
        transaction_id: str,
        dataset_id: str,
        prev_transform: TransformSql,
        next_transform: TransformSql,
        prev_checkpoint: Path | None,
        new_checkpoint: Path,
    ) -> MigrateResult:
        reply = self._call(
            self._stub.MigrateQuery,
            pb.MigrateRequest(
                transaction_id=transaction_id,
                dataset_id=dataset_id,
                prev_transform=_transform(prev_transform),
                next_transform=_transform(next_transform),
                prev_checkpoint_dir=str(prev_checkpoint) if prev_checkpoint else "",
                new_checkpoint_dir=str(new_checkpoint),
            ),
        )
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return MigrateResult(reply.migrated.state_carried, reply.migrated.message)

    def preprocess(
        self, dataset_id: str, input_path: Path, transform: TransformSql, output_path: Path,
        transaction_id: str = "",
    ) -> int:
        """Runs a root's preprocess query over ``input_path`` (the view ``input``) into
        ``output_path``; returns the number of records."""
        reply = self._call(
            self._stub.Preprocess,
            pb.PreprocessRequest(
                transaction_id=transaction_id, dataset_id=dataset_id, input_path=str(input_path),
                transform=_transform(transform), output_path=str(output_path),
            ),
        )
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return reply.result.num_records

    def read_source(
        self, dataset_id: str, input_path: Path, format: str, options: dict[str, str],
        schema: pa.Schema, output_dir: Path, split_bytes: int = 0, transaction_id: str = "",
    ) -> list[Path]:
        """Reads one source file into Parquet files under ``output_dir``, in record order."""
        reply = self._call(
            self._stub.ReadSource,
            pb.ReadSourceRequest(
                transaction_id=transaction_id, dataset_id=dataset_id, input_path=str(input_path),
                format=format, options=options, arrow_schema=_schema_bytes(schema),
                output_dir=str(output_dir), split_bytes=split_bytes,
            ),
        )
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return [Path(p) for p in reply.result.parts]

    def derive_field_lineage(
        self, dataset_id: str, inputs: list[InputSchema], transform: TransformSql,
        vocab: DatasetVocabulary, transaction_id: str = "",
    ) -> FieldLineage:
        """The column-level lineage of ``transform`` over the inputs' schemas (no data read)."""
        request = pb.LineageRequest(
            transaction_id=transaction_id, dataset_id=dataset_id,
            inputs=[_input_schema(i) for i in inputs], transform=_transform(transform),
            vocab=_vocab(vocab),
        )
        try:
            reply = self._stub.DeriveLineage(request)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:  # an engine (image) built before it
                raise EngineError("UNSUPPORTED", "this engine build has no DeriveLineage "
                                                 "(rebuild the engine image)") from None
            raise _transport_error(exc) from None
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        return _field_lineage(reply.lineage)

    def derive_provenance(
        self, dataset_id: str, inputs: list[ExecuteInput], transform: TransformSql,
        vocab: DatasetVocabulary, records: pa.Table, transaction_id: str = "",
    ) -> ProvenanceResult:
        """Which input rows make each of ``records`` (see proto/engine.proto)."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, records.schema) as writer:
            writer.write_table(records)
        request = pb.ProvenanceRequest(
            transaction_id=transaction_id, dataset_id=dataset_id,
            inputs=[_execute_input(i) for i in inputs], transform=_transform(transform),
            vocab=_vocab(vocab), records=sink.getvalue().to_pybytes(),
        )
        reply = self._call(self._stub.DeriveProvenance, request)
        if reply.HasField("error"):
            raise _engine_error(reply.error)
        derivations = pa.ipc.open_stream(reply.result.derivations).read_all()
        return ProvenanceResult(derivations, reply.result.stateful)

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
    )


def _execute_input(i: ExecuteInput):
    message = pb.ExecuteInput(
        dataset_id=i.dataset_id,
        vocab=_vocab(i.vocab),
        arrow_schema=_schema_bytes(i.schema),
        system_time_interval=i.system_time_interval,
        data_paths=[str(p) for p in i.data_paths],
    )
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
    return engine_error(pb.Error.Kind.Name(error.kind), error.message, position)


def _transport_error(exc: grpc.RpcError) -> EngineError:
    return EngineUnavailable(f"engine call failed ({exc.code().name}): {exc.details()}")


def _schema_bytes(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes()


def _read_schema(data: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(data))
