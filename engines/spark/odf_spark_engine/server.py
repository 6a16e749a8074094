"""The engine's gRPC server.

    python -m odf_spark_engine.server --socket RUN_DIR/engine.sock [--port 5544]
        [--lease RUN_DIR/lease | --lease RUN_DIR/leases --keep-warm SECONDS] [--log-file RUN_DIR/engine.log]
        [--master local[2]] [--conf spark.driver.memory=1g ...]

One SparkSession is created at start-up and shared by every request (each request works in its
own ``newSession()``, so temp views never leak between requests). The server starts listening
only once Spark is up, so a connectable socket means a ready engine. Requests that use Spark
run one at a time: the machine is small and Spark parallelises inside a request anyway.

With ``--lease`` the engine lives only while the coordinator holds that lease (``lease.py``):
it watches the lease from before Spark starts and exits at once when the lease is free. Nobody
is left to read an answer, and whatever a request was writing is in the run folder, which the
coordinator's next command removes; Spark's JVM ends with the engine (the sandbox's or the
container's PID namespace ends, and a JVM started by PySpark exits when its stdin closes).
With ``--keep-warm`` the lease is a folder of the leases of the commands using the engine, and
the engine exits once none has been held for that many seconds (a warm engine, ``lease.py``).
"""
from __future__ import annotations

import argparse
import logging
import os
import platform
import signal
import threading
import time
import traceback
from concurrent import futures

import grpc

from . import __version__, batch, lease, lineage, provenance, rows, source, streaming
from .class_archive import with_archive
from .errors import EngineFailure, Kind
from .generated import engine_pb2 as pb
from .generated import engine_pb2_grpc as pb_grpc

log = logging.getLogger("odf_spark_engine")

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "false",  # unsupported in streaming; Spark warns otherwise
}
LINEAGE_MEMO = 256  # field lineages a warm engine remembers (the oldest is forgotten first)


class EngineService(pb_grpc.EngineServicer):
    def __init__(self, spark, master: str):
        self.spark = spark
        self.master = master
        self._spark_lock = threading.Lock()
        # Field lineage is a function of a request's transform, inputs' schemas and vocabulary
        # (its transaction and dataset only name it in logs), and each step of a pull asks for
        # its query's: a warm engine plans each distinct one once.
        self._lineage: dict[bytes, pb.FieldLineageResult] = {}

    def Identify(self, request, context):
        return pb.IdentifyResponse(
            engine_name="spark",
            engine_version=__version__,
            spark_version=self.spark.version,
            spark_master=self.master,
            python_version=platform.python_version(),
        )

    def _answer(self, name, request, response, field, compute):
        """``response(field=compute())``, or the failure as the response's error."""
        with self._spark_lock, _logged(name, request):
            try:
                return response(**{field: compute()})
            except EngineFailure as failure:
                return response(error=failure.to_proto())
            except Exception as exc:
                return response(error=_internal(exc))

    def ValidateQuery(self, request, context):
        return self._answer("validate", request, pb.ValidateResponse, "schema",
                            lambda: streaming.validate(self.spark, request))

    def ExecuteQuery(self, request, context):
        with self._spark_lock, _logged("execute", request):
            try:
                yield from streaming.execute(self.spark, request)
            except EngineFailure as failure:
                log.info("execute %s failed: %s", request.transaction_id, failure.message)
                yield pb.ExecuteResponse(error=failure.to_proto())
            except Exception as exc:
                yield pb.ExecuteResponse(error=_internal(exc))

    def MigrateQuery(self, request, context):
        return self._answer("migrate", request, pb.MigrateResponse, "migrated",
                            lambda: streaming.migrate(request))

    def Preprocess(self, request, context):
        return self._answer("preprocess", request, pb.PreprocessResponse, "result",
                            lambda: batch.preprocess(self.spark, request))

    def ReadSource(self, request, context):
        return self._answer("read", request, pb.ReadSourceResponse, "result",
                            lambda: source.read_source(self.spark, request))

    def DeriveLineage(self, request, context):
        return self._answer("lineage", request, pb.LineageResponse, "lineage",
                            lambda: self._field_lineage(request))

    def _field_lineage(self, request: pb.LineageRequest) -> pb.FieldLineageResult:
        key = pb.LineageRequest(inputs=request.inputs, transform=request.transform,
                                vocab=request.vocab).SerializeToString(deterministic=True)
        if key not in self._lineage:
            if len(self._lineage) >= LINEAGE_MEMO:
                del self._lineage[next(iter(self._lineage))]
            self._lineage[key] = lineage.derive(self.spark, request)
        return self._lineage[key]

    def DeriveRowMapping(self, request, context):
        return self._answer("row mapping", request, pb.RowMappingResponse, "mapping",
                            lambda: rows.derive(self.spark, request))

    def DeriveProvenance(self, request, context):
        return self._answer("provenance", request, pb.ProvenanceResponse, "result",
                            lambda: provenance.derive(self.spark, request))


class _logged:
    """Logs a request's start, end and duration to the engine log."""

    def __init__(self, operation: str, request):
        self.label = f"{operation} tx={request.transaction_id or '-'} dataset={request.dataset_id or '-'}"

    def __enter__(self):
        self.start = time.monotonic()
        log.info("%s: start", self.label)

    def __exit__(self, *exc_info):
        log.info("%s: done in %.2f s", self.label, time.monotonic() - self.start)


def _internal(exc: Exception) -> pb.Error:
    # The traceback is for the engine log; the coordinator gets one readable line.
    log.error("internal error\n%s", traceback.format_exc())
    return pb.Error(kind=Kind.INTERNAL, message=f"{type(exc).__name__}: {exc}")


def create_spark(master: str, conf: dict[str, str]):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("odf-spark-engine")
    for key, value in with_archive({**DEFAULT_CONF, **conf}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="odf_spark_engine.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--port", type=int, help="also listen on 0.0.0.0:PORT (5544 by the spec)")
    parser.add_argument("--lease", help="run only while another process holds a lock on this file")
    parser.add_argument("--keep-warm", type=float, default=0.0, metavar="SECONDS",
                        help="--lease names a folder of leases: run until none has been held for this long")
    parser.add_argument("--log-file", help="append the engine's output (and Spark's) to this file")
    parser.add_argument(
        "--master",
        default=os.environ.get("ODF_SPARK_MASTER", "local[2]"),
        help="Spark master URL (env ODF_SPARK_MASTER; default local[2])",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)"
    )
    args = parser.parse_args(argv)
    try:
        args.conf = dict(item.split("=", 1) for item in args.conf)
    except ValueError:
        parser.error("--conf takes KEY=VALUE")
    return args


def main(argv=None) -> None:
    args = _parse_args(argv)
    if args.log_file:
        # At the descriptor level, so Spark's JVM (a child) writes there too.
        fd = os.open(args.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # PySpark logs every SQL error with a Java stack trace; the engine reports them itself.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    if args.lease:
        lease.watch(args.lease, lambda: _abandoned(args.lease, args.keep_warm), keep_warm=args.keep_warm)

    started = time.monotonic()
    spark = create_spark(args.master, args.conf)
    log.info("Spark %s up on %s in %.1f s", spark.version, args.master, time.monotonic() - started)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_EngineServicer_to_server(EngineService(spark, args.master), server)
    if os.path.exists(args.socket):
        os.unlink(args.socket)  # a stale socket from a previous engine in the same run folder
    # Bound by a path relative to its folder: unix socket paths are limited to 107 bytes and
    # a run folder deep in a workspace can be longer.
    os.chdir(os.path.dirname(os.path.abspath(args.socket)))
    server.add_insecure_port(f"unix:{os.path.basename(args.socket)}")
    if args.port:
        server.add_insecure_port(f"0.0.0.0:{args.port}")
    server.start()
    log.info("odf-spark-engine %s listening on unix:%s%s", __version__, args.socket,
             f" and port {args.port}" if args.port else "")

    stopping.wait()
    log.info("shutting down")
    server.stop(grace=5).wait()
    spark.stop()


def _abandoned(lease_path: str, keep_warm: float) -> None:
    if keep_warm:
        log.info("no command has used the engine for %.0f s (%s): exiting", keep_warm, lease_path)
    else:
        log.warning("lease %s is free (the coordinator is gone): exiting", lease_path)
    os._exit(3)


if __name__ == "__main__":
    main()
