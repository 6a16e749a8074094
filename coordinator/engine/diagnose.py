"""``coord system diagnose``: can this machine run engines, and which runtime would it use?

Each check tries the real thing (bubblewrap starts a sandbox, Java prints its version, the
container API answers a ping and holds the image) and says how to fix what failed. A check of
a runtime the settings do not need (the container API when ``engine.runtime: sandbox``) can
only warn: the machine still works. Nothing here starts Spark.
"""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .process import EngineStartError
from .runtime import container_runtime
from .sandbox import ENGINE_PACKAGES, bwrap_command, class_archive_path, find_java_home
from .settings import EngineSettings

FREE_SPACE_WARNING = 2 * 1024**3  # Spark's shuffle and a pull's slices need room
# The first release of each Python line whose tarfile filters hold against nested links
# (CVE-2025-4517 and its siblings); older ones let a crafted archive write outside its folder.
ARCHIVE_FIXES: dict[tuple[int, ...], tuple[int, ...]] = {
    (3, 11): (3, 11, 13), (3, 12): (3, 12, 11), (3, 13): (3, 13, 4)}
TIMEOUT_S = 20


class CheckStatus(StrEnum):
    OK = "ok"
    WARN = "warn"  # not needed by the settings, or low on something
    FAIL = "fail"  # engines cannot run as configured


@dataclass(frozen=True)
class Check:
    name: str
    status: CheckStatus
    detail: str
    fix: str = ""  # what to do, when not OK


def diagnose(settings: EngineSettings, folder: Path) -> list[Check]:
    """Every check, for engines run with ``settings`` from a workspace in ``folder``."""
    container = container_runtime()
    api = container is not None and container.container_api_available()
    image = api and container is not None and container.image_available(settings.image)
    sandbox_needed = settings.runtime == "sandbox" or (settings.runtime == "auto" and not image)
    container_needed = settings.runtime == "container"
    checks = [
        _python_packages(),
        _python_archives(tuple(sys.version_info[:3])),
        _java(needed=sandbox_needed),
        _sandbox(settings, needed=sandbox_needed),
        _class_archive(needed=sandbox_needed),
        _container_api(api, container, needed=container_needed),
        _image(image, api, settings, needed=container_needed),
        _free_space(folder),
    ]
    runtime = settings.runtime if settings.runtime != "auto" else ("container" if image else "sandbox")
    usable = not any(c.status is CheckStatus.FAIL for c in checks)
    checks.append(Check("runtime", CheckStatus.OK if usable else CheckStatus.FAIL,
                        f"engine.runtime: {settings.runtime} runs engines in the {runtime}"
                        + ("" if usable else ", which cannot start here"),
                        "" if usable else "fix the failures above, or choose the other runtime "
                                          "(coord config set engine.runtime sandbox|container)"))
    return checks


def _python_packages() -> Check:
    missing = [p for p in ENGINE_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        return Check("python packages", CheckStatus.FAIL, f"missing: {', '.join(missing)}",
                     "make install (or pip install -e .)")
    return Check("python packages", CheckStatus.OK, f"the engine's packages: {', '.join(ENGINE_PACKAGES)}")


def _python_archives(version: tuple[int, ...]) -> Check:
    """A warning only: coord unpacks checkpoints by its own rules, not the Python's filters, but
    other tools on the same Python do not."""
    named = ".".join(map(str, version))
    fixed = ARCHIVE_FIXES.get(version[:2])
    if fixed is not None and version < fixed:
        return Check("python archives", CheckStatus.WARN,
                     f"Python {named}'s tarfile filters can be bypassed by crafted archives "
                     "(CVE-2025-4517); coord does not rely on them",
                     f"upgrade Python to {'.'.join(map(str, fixed))} or later")
    return Check("python archives", CheckStatus.OK, f"Python {named}")


def _java(*, needed: bool) -> Check:
    java_home = find_java_home()
    java = java_home / "bin" / "java" if java_home else None
    if java is None or not java.exists():
        return _unmet("java", needed, "no Java found ($JAVA_HOME unset and no java on PATH)",
                      "apt-get install -y openjdk-17-jre-headless (Spark runs on Java 11 or 17)")
    ran = _run([str(java), "-version"])
    if isinstance(ran, str):
        return _unmet("java", needed, f"{java} does not run: {ran}", "reinstall Java, or set JAVA_HOME")
    version = next((line for line in ran.stderr.splitlines() if "version" in line), ran.stderr.strip())
    return Check("java", CheckStatus.OK, f"{java}: {version.strip()}")


def _sandbox(settings: EngineSettings, *, needed: bool) -> Check:
    with tempfile.TemporaryDirectory(prefix="coord-diagnose-") as run_dir:
        try:
            command = bwrap_command(settings, Path(run_dir), [], ["/bin/true"])
        except EngineStartError as e:
            return _unmet("sandbox", needed, str(e), "apt-get install -y bubblewrap")
        ran = _run(command)
    if isinstance(ran, str) or ran.returncode != 0:
        why = ran if isinstance(ran, str) else (ran.stderr.strip().splitlines() or ["no message"])[-1]
        return _unmet("sandbox", needed, f"bubblewrap cannot start a sandbox: {why}",
                      "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
                      "in a container: --security-opt seccomp=unconfined), or use the container runtime")
    return Check("sandbox", CheckStatus.OK, f"bubblewrap starts a sandbox ({shutil.which('bwrap')})")


def _class_archive(*, needed: bool) -> Check:
    archive = class_archive_path()
    if archive.is_file():
        return Check("class archive", CheckStatus.OK, f"sandboxed engines map {archive}")
    return Check("class archive", CheckStatus.WARN,
                 "none for this JVM and Spark: sandboxed engines start slower" if needed
                 else "none (the sandbox is not used)", "coord system prepare" if needed else "")


def _container_api(api: bool, container, *, needed: bool) -> Check:
    if container is None:
        return _unmet("container API", needed, "the container runtime is not part of this build",
                      "pip install docker")
    url = container.api_url()
    if not api:
        return _unmet("container API", needed, f"nothing answers at {url}",
                      "start Podman's API with engines/spark/podman-setup.sh (or set $DOCKER_HOST)")
    return Check("container API", CheckStatus.OK, f"answers at {url}")


def _image(image: bool, api: bool, settings: EngineSettings, *, needed: bool) -> Check:
    if not api:
        return _unmet("engine image", needed, "not checked: no container API", "see the container API")
    if not image:
        return _unmet("engine image", needed, f"{settings.image} is not there", "make engine-image")
    return Check("engine image", CheckStatus.OK, settings.image)


def _free_space(folder: Path) -> Check:
    free = shutil.disk_usage(folder).free
    detail = f"{free / 1024**3:.1f} GB free under {folder}"
    if free < FREE_SPACE_WARNING:
        return Check("disk", CheckStatus.WARN, detail, "free some space: Spark and pulls need a few GB")
    return Check("disk", CheckStatus.OK, detail)


def _unmet(name: str, needed: bool, detail: str, fix: str) -> Check:
    return Check(name, CheckStatus.FAIL if needed else CheckStatus.WARN,
                 detail if needed else f"{detail} (not needed by engine.runtime)", fix)


def _run(command: list[str]) -> subprocess.CompletedProcess | str:
    """The finished command, or why it could not run."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
