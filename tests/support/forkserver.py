"""A fork server for ``coord`` processes: one Python with the coordinator's modules imported,
forked for each command a test runs.

A fresh interpreter spends 0.3-1 s importing Arrow, DuckDB, JSON Schema, YAML and the
coordinator before a command starts its work, and the suite runs thousands of commands. A
child forked from this server is still a real process of its own (its own working folder,
environment, standard streams, exit code or signal, crash points), which is what the tests
of the CLI need; it only skips the imports. The server forks with no Python thread but its
own (checked at start; the native pools Arrow starts, jemalloc's and OpenBLAS's, have at-fork
handlers) and imports nothing that opens a connection or starts a thread at import: the
HTTP server's and gRPC's modules are imported, a server, a channel and gRPC's core threads
start only in a child.

Protocol, one JSON object per line: the test process writes ``{"args", "cwd", "env", "out",
"err"}`` on the server's stdin; the server answers ``{"pid"}`` when the child runs and
``{"status"}`` (an exit code, or minus the signal) when it ended. A request with ``"held"``
(a command the test holds while it runs others, e.g. ``coord serve``) is answered with
``{"pid"}`` at once: a monitor process forks the command, waits for it and writes its status
to the file ``held`` names. The server ends with its stdin.
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import sys
import threading
import traceback

# What the commands import when they run (each command only what it needs, so a fork would
# import, and without bytecode files compile, the rest itself: 0.1-0.4 s of CPU a command).
PRELOAD = [
    "pyarrow", "pyarrow.parquet", "pyarrow.csv", "pyarrow.json", "pyarrow.compute",
    "pyarrow.dataset", "duckdb", "jsonschema", "yaml", "flatbuffers", "rich.console", "rich.table",
    "rich.tree", "rich.progress", "rich.live", "difflib", "graphlib",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "cryptography.hazmat.primitives.serialization", "boto3",
    "coordinator.cli.main", "coordinator.build.pull", "coordinator.build.current_derivative",
    "coordinator.build.status", "coordinator.build.upgrade", "coordinator.engine.warm",
    "coordinator.engine.reaper", "coordinator.ingest.pipeline", "coordinator.ingest.current",
    "coordinator.ingest.in_engine", "coordinator.ingest.prepare", "coordinator.ingest.read",
    "coordinator.ingest.convert", "coordinator.ingest.slice_layout", "coordinator.lineage.datasets",
    "coordinator.metadata.odf39.manifests", "coordinator.metadata.odf39.from_odf18",
    "coordinator.query.sql", "coordinator.query.tail", "coordinator.query.state",
    "coordinator.repository.transfer", "coordinator.repository.current",
    "coordinator.repository.push", "coordinator.repository.publish", "coordinator.repository.feed",
    "coordinator.store.define", "coordinator.store.overview", "coordinator.store.verify",
    "coordinator.store.verified", "coordinator.store.signatures", "coordinator.transform.execute",
    "coordinator.transform.definition", "coordinator.transform.replay", "coordinator.trust.verify",
    "coordinator.workspace.served", "coordinator.serve.server", "coordinator.serve.api",
    "coordinator.serve.smart", "uvicorn", "fastapi",
    "tests.support.engines", "tests.support.fake_engine",
]


def exit_code(exc: SystemExit) -> int:
    """The status a process ends with by ``exc``, as Python's own exit gives it."""
    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def _child(request: dict) -> None:
    """In the forked child: become ``coord ARGS`` and end with its exit code."""
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((devnull, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["coord", *request["args"]]

        from coordinator.cli.main import main

        from .engines import use_chosen_engine_in_coord

        use_chosen_engine_in_coord()
        main()
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException:
        traceback.print_exc()
        code = 99
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _read_s3_models() -> None:
    """Have the process's boto3 session read botocore's S3 model files, which each child would
    read again at its first client (0.2-0.4 s). Keys and region are given, so nothing a child's
    environment decides (credentials, region) is resolved here."""
    from coordinator.repository.fileio import s3_session

    s3_session().client("s3", region_name="us-east-1", aws_access_key_id="-",
                        aws_secret_access_key="-")


def _start_held(request: dict) -> int:
    """Fork a monitor that forks the command, tells its pid, waits for it and writes its status
    to ``request["held"]`` (whole, by a rename); the command's pid."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(read_end)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # the channel is the server's
            os.dup2(devnull, fd)
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            _child(request)
        os.write(write_end, str(pid).encode())
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        with open(request["held"] + ".partial", "w") as f:
            f.write(str(os.waitstatus_to_exitcode(status)))
        os.rename(request["held"] + ".partial", request["held"])
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        return int(answer.read())


def _reap_monitors() -> None:
    """Collect the monitors of held commands that have ended (no other child is running)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def serve() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    _read_s3_models()
    if threading.active_count() != 1:
        raise SystemExit(f"forkserver: {threading.enumerate()} after the imports; forking would be unsafe")
    channel_in, channel_out = sys.stdin, sys.stdout
    channel_out.write(json.dumps({"ready": True}) + "\n")
    channel_out.flush()
    for line in channel_in:
        request = json.loads(line)
        _reap_monitors()
        if request.get("held"):
            channel_out.write(json.dumps({"pid": _start_held(request)}) + "\n")
            channel_out.flush()
            continue
        pid = os.fork()
        if pid == 0:
            _child(request)
        channel_out.write(json.dumps({"pid": pid}) + "\n")
        channel_out.flush()
        _, status = os.waitpid(pid, 0)
        channel_out.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
        channel_out.flush()


if __name__ == "__main__":
    serve()
