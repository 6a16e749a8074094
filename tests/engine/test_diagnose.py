"""``coord system diagnose``: each check tries the real thing and names a fix for what fails;
only what the configured runtime needs can fail the command."""
from __future__ import annotations

import json
import sys

import pytest

from coordinator.engine.diagnose import CheckStatus, _python_archives
from tests.support.cli import coord


def diagnose(cwd, env=None):
    proc = coord("system", "diagnose", "-o", "json", cwd=cwd, env=env, check=False)
    return proc.returncode, {c["check"]: c for c in json.loads(proc.stdout)}


def test_this_machine_runs_sandboxed_engines(tmp_path):
    code, checks = diagnose(tmp_path, {"COORD_ENGINE_RUNTIME": "sandbox"})
    assert code == 0
    assert {name: checks[name]["status"] for name in ("python packages", "java", "sandbox", "runtime")} == \
        dict.fromkeys(("python packages", "java", "sandbox", "runtime"), "ok")
    assert checks["runtime"]["detail"] == "engine.runtime: sandbox runs engines in the sandbox"


def test_without_bubblewrap_and_java_the_sandbox_fails_with_fixes(tmp_path):
    bare = {"COORD_ENGINE_RUNTIME": "sandbox", "PATH": str(tmp_path), "JAVA_HOME": ""}
    code, checks = diagnose(tmp_path, bare)
    assert code == 1
    assert checks["sandbox"]["status"] == "fail"
    assert checks["sandbox"]["fix"] == "apt-get install -y bubblewrap"
    assert checks["java"]["status"] == "fail" and "openjdk" in checks["java"]["fix"]
    assert checks["runtime"]["status"] == "fail"


def test_a_missing_container_api_fails_only_the_container_runtime(tmp_path):
    gone = f"unix://{tmp_path}/no.sock"
    code, checks = diagnose(tmp_path, {"COORD_ENGINE_RUNTIME": "container", "COORD_CONTAINER_HOST": gone})
    assert code == 1
    assert checks["container API"] == {"check": "container API", "status": "fail",
                                       "detail": f"nothing answers at {gone}",
                                       "fix": "start Podman's API with engines/spark/podman-setup.sh "
                                              "(or set $DOCKER_HOST)"}
    code, checks = diagnose(tmp_path, {"COORD_ENGINE_RUNTIME": "auto", "COORD_CONTAINER_HOST": gone})
    assert code == 0 and checks["container API"]["status"] == "warn"
    assert checks["runtime"]["detail"] == "engine.runtime: auto runs engines in the sandbox"


def test_the_table_names_each_check_and_its_fix(tmp_path):
    gone = f"unix://{tmp_path}/no.sock"
    out = coord("system", "diagnose", cwd=tmp_path,
                env={"COORD_ENGINE_RUNTIME": "auto", "COORD_CONTAINER_HOST": gone}).stdout
    assert "container API" in out and "fix: start Podman's API" in out


@pytest.mark.parametrize(("version", "status"), [
    ((3, 11, 7), CheckStatus.WARN), ((3, 11, 13), CheckStatus.OK), ((3, 12, 10), CheckStatus.WARN),
    ((3, 12, 11), CheckStatus.OK), ((3, 13, 3), CheckStatus.WARN), ((3, 14, 0), CheckStatus.OK)])
def test_a_python_whose_archive_filters_have_known_holes_is_named(version, status):
    check = _python_archives(version)
    assert check.status is status
    if status is CheckStatus.WARN:
        assert "CVE-2025-4517" in check.detail and "upgrade Python" in check.fix


def test_diagnose_reports_this_pythons_archive_filters(tmp_path):
    code, checks = diagnose(tmp_path, {"COORD_ENGINE_RUNTIME": "sandbox"})
    assert checks["python archives"]["status"] == _python_archives(tuple(sys.version_info[:3])).status
