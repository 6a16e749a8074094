"""Spark's classes archived for the JVM (engines/spark/odf_spark_engine/class_archive.py): the
sandbox mounts this machine's archive read-only and names it to the engine, whose driver JVM
then maps it; the user's own driver options still apply."""
from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.engine import stubs
from coordinator.engine.sandbox import bwrap_command, class_archive_path
from coordinator.engine.settings import EngineSettings
from tests.support.cli import coord
from tests.support.engines import TEST_SPARK_CONF

ARCHIVE_ENV = "ODF_SPARK_CLASS_ARCHIVE"


@pytest.fixture
def engine_module(monkeypatch):
    monkeypatch.syspath_prepend(str(stubs.ENGINE_DIR))
    from odf_spark_engine import class_archive

    return class_archive


def test_the_sandbox_mounts_the_archive_read_only_and_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ODF_CACHE_DIR", str(tmp_path / "cache"))
    archive = class_archive_path()
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"classes")
    args = bwrap_command(EngineSettings(runtime="sandbox"), tmp_path / "run", [], ["true"])
    assert any(args[i:i + 3] == ["--ro-bind", str(archive), str(archive)] for i in range(len(args)))
    assert any(args[i:i + 3] == ["--setenv", ARCHIVE_ENV, str(archive)] for i in range(len(args)))


def test_without_an_archive_the_sandbox_names_none(tmp_path, monkeypatch):
    monkeypatch.setenv("ODF_CACHE_DIR", str(tmp_path / "cache"))
    args = bwrap_command(EngineSettings(runtime="sandbox"), tmp_path / "run", [], ["true"])
    assert ARCHIVE_ENV not in args


def test_the_driver_maps_the_archive_before_the_users_own_options(tmp_path, monkeypatch, engine_module):
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"classes")
    monkeypatch.setenv(ARCHIVE_ENV, str(archive))
    conf = engine_module.with_archive({"spark.driver.extraJavaOptions": "-Xss4m", "spark.x": "1"})
    assert conf == {"spark.driver.extraJavaOptions":
                    f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds*=off -Xss4m", "spark.x": "1"}


def test_a_named_archive_that_is_missing_changes_nothing(tmp_path, monkeypatch, engine_module):
    monkeypatch.setenv(ARCHIVE_ENV, str(tmp_path / "gone.jsa"))
    assert engine_module.with_archive({"spark.x": "1"}) == {"spark.x": "1"}


def _descendants(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return children + [d for c in children for d in _descendants(c)]


@pytest.mark.engine_start
def test_a_sandboxed_engines_jvm_maps_the_archive_coord_system_prepare_made(tmp_path):
    from coordinator.engine.client import EngineClient
    from coordinator.engine.sandbox import start_sandbox

    made = coord("system", "prepare", cwd=tmp_path).stdout  # a minute, unless made already
    archive = class_archive_path()
    assert str(archive) in made and archive.stat().st_size > 10_000_000
    settings = EngineSettings(runtime="sandbox", spark_conf=TEST_SPARK_CONF)
    engine = start_sandbox(settings, tmp_path / "run", [])
    try:
        with EngineClient(engine.socket_path) as client:
            assert client.identify().engine_name == "spark"
        jvms = [pid for pid in _descendants(engine.engine_pid)
                if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]]
        assert jvms, "the engine runs no JVM"
        assert str(archive) in Path(f"/proc/{jvms[0]}/maps").read_text()
    finally:
        engine.stop()
    assert "already made" in coord("system", "prepare", cwd=tmp_path).stdout


def test_diagnose_names_the_archive_or_says_how_to_make_one(tmp_path, monkeypatch):
    from coordinator.engine.diagnose import _class_archive

    monkeypatch.setenv("ODF_CACHE_DIR", str(tmp_path / "cache"))
    missing = _class_archive(needed=True)
    assert (missing.status, missing.fix) == ("warn", "coord system prepare")
    class_archive_path().parent.mkdir(parents=True)
    class_archive_path().write_bytes(b"classes")
    assert _class_archive(needed=True).status == "ok"

