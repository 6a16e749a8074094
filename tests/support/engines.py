"""Which engine a test's commands get, in the test process and in the ``coord`` processes it
runs.

Starting Spark costs 10-20 s, so each test process (an xdist worker) starts it once: its tests
marked ``spark`` share one sandboxed engine (``start_shared_engine``), which may read every
folder of the test session and writes only its own run folder; their commands attach to it
(``coordinator.engine.attach``). Only the tests marked ``engine_start`` start engines of their
own, because starting, stopping, isolating or choosing an engine is what they test. Any other
test that opens an engine fails (``refuse_engine``): the fast suite provably starts none.

A ``coord`` child process learns its engine from ``$COORD_TEST_ENGINE`` (read by
``tests.support.entry`` and the fork server): ``fake`` (the DuckDB engine), ``attach:PATH``
(the shared engine's endpoint file), ``own`` (the configured runtime, started per command) or
``none``.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path

from coordinator.engine import factory
from coordinator.engine.attach import EngineEndpoint, attached_engine

ENV = "COORD_TEST_ENGINE"
ENDPOINT_FILE = "endpoint.json"

# Settings of the tests' engines, the shared one and those tests start through a workspace
# (under the workspace's own sparkConf): small local Sparks running tiny queries. One shuffle
# partition (one state store per stateful operator) and the JVM's quick compiler only (no C2,
# whose compile threads compete for the machine's 2 cores on data this small) halve the time
# of a call and cut a third of Spark's start. Without whole-stage code generation each query
# runs Spark's interpreted operators instead of compiling Java for rows this few (the same
# answers; tests/engine/test_chained_stateful.py: 135 s of CPU against 166 s). Production settings are kept by
# tests/engine/test_sandbox.py, which starts an engine with the defaults a user's workspace has.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
TEST_SPARK_CONF = {
    "spark.driver.memory": "768m",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": TEST_JAVA_OPTIONS,  # a cluster's executors (test_spark_cluster)
}


REFUSAL = ("this test opened an engine: mark it `spark` (the shared engine) or `engine_start` "
           "(engines of its own)")
REFUSED_EXIT = 86  # a `coord` process that opened an engine it was refused ends with this code
refusals: list[str] = []  # engines refused in this process; the test fails on any, even if caught


class EngineRefused(AssertionError):
    """A test not marked for engines opened one."""


def refuse_engine(settings, run_dir, read_only_paths) -> AbstractContextManager:
    refusals.append(str(run_dir))
    raise EngineRefused(REFUSAL)


def refuse_engine_and_exit(settings, run_dir, read_only_paths) -> AbstractContextManager:
    """In a ``coord`` process: end it at once, so that no caller inside can swallow the refusal
    (``coord serve`` keeps going past a failed pull)."""
    sys.stderr.write(f"coord (test): {REFUSAL}\n")
    sys.stderr.flush()
    os._exit(REFUSED_EXIT)


def use_chosen_engine_in_coord() -> None:
    """In a ``coord`` process: every engine it opens is the one ``$COORD_TEST_ENGINE`` names,
    and an engine it starts itself runs with the test settings."""
    mode = os.environ.get(ENV, "")
    factory.use_engine(refuse_engine_and_exit if mode == "none" else opener_for(mode))
    if opener_for(mode) is None:
        from coordinator.engine import session

        session.engine_settings = with_test_spark_conf(session.engine_settings)


def with_test_spark_conf(engine_settings):
    """``session.engine_settings`` with ``TEST_SPARK_CONF`` under the workspace's sparkConf."""

    def settings(ws):
        s = engine_settings(ws)
        return replace(s, spark_conf={**TEST_SPARK_CONF, **s.spark_conf})

    return settings


def attach_to(endpoint_file: Path) -> factory.EngineOpener:
    endpoint = EngineEndpoint.read(endpoint_file)
    return lambda settings, run_dir, read_only_paths: attached_engine(endpoint, read_only_paths)


def opener_for(mode: str) -> factory.EngineOpener | None:
    """The opener ``$COORD_TEST_ENGINE`` names (None: the configured runtime)."""
    if mode == "fake":
        from .fake_engine import open_fake_engine

        return open_fake_engine
    if mode.startswith("attach:"):
        return attach_to(Path(mode.removeprefix("attach:")))
    if mode == "none":
        return refuse_engine
    if mode in ("", "own"):
        return None
    raise ValueError(f"{ENV}={mode!r}: expected fake, attach:PATH, own or none")


@contextmanager
def start_shared_engine(readable: Path) -> Iterator[Path]:
    """Start one sandboxed engine that may read ``readable``; yields its endpoint file."""
    from coordinator.engine.sandbox import start_sandbox
    from coordinator.engine.settings import EngineSettings

    # Outside ``readable``: the run folder must stay writable under a read-only mount.
    run_dir = Path(tempfile.mkdtemp(prefix="coord-shared-engine-"))
    engine = start_sandbox(EngineSettings(runtime="sandbox", spark_conf=TEST_SPARK_CONF),
                           run_dir, [readable])
    try:
        endpoint_file = run_dir / ENDPOINT_FILE
        EngineEndpoint(engine.socket_path, run_dir, (readable,), engine.identity).write(endpoint_file)
        yield endpoint_file
    finally:
        engine.stop()
        shutil.rmtree(run_dir, ignore_errors=True)

