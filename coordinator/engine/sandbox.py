"""The sandbox runtime: the engine as a local process under bubblewrap.

The sandbox sees the whole file system read-only (so the engine's code, Python and Java are
there), a private /tmp, its run folder writable, the given input paths read-only, no network
(only its own loopback) and its own PID namespace. The engine is PID 1 inside, so a SIGTERM
reaches its handler and it shuts down cleanly; when it exits, the kernel ends everything else
in the namespace (Spark's JVM). The sandbox dies with the coordinator (``--die-with-parent``
and a parent-death signal) and the engine also watches the coordinator's lease, when given one.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..metadata.objects import EngineIdentity
from . import stubs
from .client import EngineClient, EngineError
from .runtime import SHARED_INPUTS_ENV, EngineStartError, shared_inputs_dir
from .settings import EngineSettings

SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
STOP_GRACE_SECONDS = 15


def bwrap_command(
    settings: EngineSettings, run_dir: Path, read_only_paths: list[Path], command: list[str]
) -> list[str]:
    """The bubblewrap command line that runs ``command`` sandboxed. Order matters: later
    mounts cover earlier ones, so the run folder stays writable even inside a read-only path."""
    if shutil.which("bwrap") is None:
        raise EngineStartError("bubblewrap (bwrap) is not installed: apt-get install -y bubblewrap")
    run_dir = run_dir.resolve()
    args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # The engine's code and Python must stay visible even when they live under /tmp (a
    # checkout or a virtualenv there would otherwise be hidden by the private /tmp).
    for path in [stubs.ENGINE_DIR, Path(sys.prefix), Path(sys.base_prefix), *read_only_paths]:
        path = path.resolve()
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(run_dir), str(run_dir)]
    shared = shared_inputs_dir(settings, run_dir)
    if shared is not None:
        args += ["--bind", str(shared), str(shared), "--setenv", SHARED_INPUTS_ENV, str(shared)]
    args += ["--unshare-pid", "--as-pid-1", "--unshare-ipc", "--die-with-parent"]
    if not settings.allow_network:
        args.append("--unshare-net")
    args += ["--chdir", str(run_dir), "--setenv", "HOME", "/tmp", "--setenv", "SPARK_LOCAL_IP", "127.0.0.1"]
    return args + ["--", *command]


def engine_command(settings: EngineSettings, socket_path: Path, lease: Path | None = None) -> list[str]:
    command = [sys.executable, "-m", "odf_spark_engine.server", "--socket", str(socket_path)]
    if lease is not None:
        command += ["--lease", str(lease.resolve())]
    command += ["--master", settings.spark_master]
    for key, value in settings.spark_conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def engine_files_hash() -> str:
    """SHA3-256 over the engine's sources and the proto: for each file in sorted relative
    path order, the path, a NUL, the content length (8 bytes big-endian) and the content."""
    files = [
        p for p in stubs.ENGINE_PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and "generated" not in p.parts
    ]
    digest = hashlib.sha3_256()
    entries = {str(p.relative_to(stubs.ENGINE_DIR)): p for p in files}
    entries["proto/engine.proto"] = stubs.PROTO_FILE
    for name in sorted(entries):
        content = entries[name].read_bytes()
        digest.update(name.encode() + b"\0" + len(content).to_bytes(8, "big") + content)
    return digest.hexdigest()


class SandboxEngine:
    """A running sandboxed engine. Use as a context manager, or call ``stop()``."""

    def __init__(self, process: subprocess.Popen, engine_pid: int, run_dir: Path, log_file):
        self.process = process
        self.engine_pid = engine_pid  # the engine's PID outside the sandbox
        self.run_dir = run_dir
        self.socket_path = run_dir / SOCKET_NAME
        self.log_path = run_dir / LOG_NAME
        self.identity: EngineIdentity | None = None
        self._log_file = log_file
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.kill(self.engine_pid, signal.SIGTERM)
                self.process.wait(timeout=STOP_GRACE_SECONDS)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log_file.close()
        self.socket_path.unlink(missing_ok=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> SandboxEngine:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start_sandbox(
    settings: EngineSettings, run_dir: Path, read_only_paths: list[Path], *, lease: Path | None = None
) -> SandboxEngine:
    stubs.ensure_generated()  # the engine cannot write its own stubs: its code is read-only
    run_dir.mkdir(parents=True, exist_ok=True)
    socket_path = run_dir.resolve() / SOCKET_NAME
    socket_path.unlink(missing_ok=True)  # a stale socket would look like a ready engine
    command = bwrap_command(settings, run_dir, read_only_paths, engine_command(settings, socket_path, lease))

    info_read, info_write = os.pipe()  # bwrap reports the engine's PID here (--info-fd)
    command[1:1] = ["--info-fd", str(info_write)]
    log_file = open(run_dir / LOG_NAME, "ab")
    env = {**os.environ, "PYTHONPATH": str(stubs.ENGINE_DIR), "PYTHONDONTWRITEBYTECODE": "1"}
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env=env,
        pass_fds=(info_write,),
        start_new_session=True,  # no terminal: Ctrl-C reaches the coordinator, which stops us
        preexec_fn=_die_with_coordinator if threading.current_thread() is threading.main_thread() else None,
    )
    os.close(info_write)
    with os.fdopen(info_read) as info:
        text = info.read()
    if not text:
        process.wait()
        log_file.close()
        raise EngineStartError(f"bubblewrap failed to start the engine; see {run_dir / LOG_NAME}")
    engine = SandboxEngine(process, json.loads(text)["child-pid"], run_dir.resolve(), log_file)
    try:
        engine.identity = _wait_until_ready(engine, settings)
    except BaseException:
        engine.stop()
        raise
    return engine


def _wait_until_ready(engine: SandboxEngine, settings: EngineSettings) -> EngineIdentity:
    deadline = time.monotonic() + settings.startup_timeout
    while not engine.socket_path.exists():
        if engine.process.poll() is not None:
            raise EngineStartError(
                f"the engine exited (code {engine.process.returncode}) while starting:\n{engine.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise EngineStartError(f"the engine did not start in {settings.startup_timeout:.0f} s")
        time.sleep(0.1)
    with EngineClient(engine.socket_path) as client:
        try:
            client.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
            info = client.identify()
        except EngineError as exc:
            raise EngineStartError(f"{exc}\n{engine.log_tail()}") from None
    return EngineIdentity(
        runtime="sandbox",
        version=info.engine_version,
        spark_version=info.spark_version,
        files_hash=engine_files_hash(),
        spark_master=settings.spark_master,
        network_isolated=settings.network_isolated,
    )


def _die_with_coordinator() -> None:
    """Runs in the child before exec: kill the sandbox if the coordinator dies, even by SIGKILL.
    Only set from the main thread: the kernel fires it when the forking *thread* ends."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
