"""The sandbox runtime: the engine as a local process under bubblewrap.

The sandbox is built from an allow-list, so that nothing a user's data can live in is there:
- read-only: the system's programs and libraries (/usr and its merged-/usr links, where the
  JVM lives too), the few files of /etc that the dynamic linker, Java and Python read, the
  Python environment, the engine's code, and the given input paths;
- writable: its run folder and a private /tmp; fresh /dev and /proc;
- absent: home folders (but the Python environment, when it lives in one), the workspace (its
  key, config and other datasets, but the input paths), and every other folder and mount
  (/mnt, /media, /srv, /opt, /var, /run ...).
The environment is cleared and rebuilt from ``engine_environment`` (nothing of the
coordinator's, credentials included, reaches the engine). No capabilities, no network (only
its own loopback) and its own PID namespace: the engine is PID 1 inside, so a SIGTERM reaches
its handler and it shuts down cleanly; when it exits, the kernel ends everything else in the
namespace (Spark's JVM).
The sandbox dies with the coordinator (``--die-with-parent`` and a parent-death signal)
and the engine also watches the coordinator's lease, when given one. A warm engine
(``settings.keep_warm``, engine/warm.py) is the exception: it outlives the command that started
it and ends by its folder of leases alone.
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
from .bwrap_paths import python_paths, system_binds
from .client import EngineClient
from .port import EngineError
from .process import EngineStartError, engine_environment, shared_inputs_dir
from .settings import EngineSettings

SOCKET_NAME = "engine.sock"
CLASS_ARCHIVE_ENV = "ODF_SPARK_CLASS_ARCHIVE"  # read by the engine (class_archive.with_archive)
LOG_NAME = "engine.log"
# The packages the engine imports (engines/spark/requirements.txt): their folders are mounted.
ENGINE_PACKAGES = ("pyspark", "py4j", "grpc", "google.protobuf", "pyarrow")
STOP_GRACE_SECONDS = 15

# What the dynamic linker, the JVM (its conf/ links into /etc/java-*, the user name from
# passwd) and Python read from /etc. Nothing else of /etc is visible.
ETC_PATHS = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
    "nsswitch.conf", "hosts", "host.conf", "localtime", "timezone", "mime.types",
)


def bwrap_command(
    settings: EngineSettings, run_dir: Path, read_only_paths: list[Path], command: list[str]
) -> list[str]:
    """The bubblewrap command line that runs ``command`` sandboxed, with the engine's
    environment. Order matters: later mounts cover earlier ones, so the run folder stays
    writable even inside a read-only path."""
    if shutil.which("bwrap") is None:
        raise EngineStartError("bubblewrap (bwrap) is not installed: apt-get install -y bubblewrap")
    run_dir = run_dir.resolve()
    args = ["bwrap", *system_binds()]
    etc = [Path("/etc", name) for name in ETC_PATHS] + sorted(Path("/etc").glob("java-*"))
    args += [arg for path in etc if path.exists() for arg in ("--ro-bind", str(path), str(path))]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in [*python_paths(ENGINE_PACKAGES), stubs.ENGINE_DIR, *read_only_paths]:
        path = path.resolve()
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(run_dir), str(run_dir)]
    shared = shared_inputs_dir(settings, run_dir)
    if shared is not None:
        args += ["--bind", str(shared), str(shared)]
    environment = _environment(shared)
    archive = class_archive_path()
    if archive.is_file():
        args += ["--ro-bind", str(archive), str(archive)]
        environment[CLASS_ARCHIVE_ENV] = str(archive)
    # No capabilities, even when the coordinator runs as root (bwrap keeps them by default):
    # with them, code in the engine could make device nodes and mount the host's disks.
    args += ["--unshare-pid", "--as-pid-1", "--unshare-ipc", "--cap-drop", "ALL"]
    # A warm engine outlives its command and watches its leases. The parent-death signal
    # bwrap sets follows the thread that started it, as ours does (``_die_with_coordinator``):
    # from another thread, the engine would end with that thread, not with the coordinator.
    if not settings.keep_warm and threading.current_thread() is threading.main_thread():
        args.append("--die-with-parent")
    if not settings.allow_network:
        args.append("--unshare-net")
    args += ["--chdir", str(run_dir), "--clearenv"]
    for name, value in environment.items():
        args += ["--setenv", name, value]
    return args + ["--", *command]


def _environment(shared: Path | None) -> dict[str, str]:
    java_home = find_java_home()
    return engine_environment(shared) | {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONPATH": str(stubs.ENGINE_DIR),
        **({"JAVA_HOME": str(java_home)} if java_home else {}),
    }


def class_archive_path() -> Path:
    """Where this machine's class archive of Spark is (engines/spark/odf_spark_engine/
    class_archive.py), named by what it depends on: the JVM, Spark's version and the folder
    of its jars (``python`` and ``python3`` find the same). A Spark or Java upgrade thus
    looks for a new one."""
    import importlib.metadata
    import importlib.util

    cache = Path(os.environ.get("ODF_CACHE_DIR")
                 or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "odf-coordinator")
    try:
        spark = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        spark = "none"  # no engine can start: diagnose says so
    found = importlib.util.find_spec("pyspark")
    jars = Path(found.origin).resolve().parent if found is not None and found.origin else None
    key = f"{find_java_home()}|{spark}|{jars}"
    return cache / "spark-classes" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def prepare_class_archive() -> tuple[Path, bool]:
    """Makes this machine's class archive unless it exists (about a minute: Spark runs a small
    workload once), outside the sandbox but in the sandbox's environment, so that the archive
    fits the JVM the sandbox starts. Returns it and whether it was made now."""
    archive = class_archive_path()
    if archive.is_file():
        return archive, False
    done = subprocess.run(
        [sys.executable, "-m", "odf_spark_engine.class_archive", str(archive)],
        env=_environment(None), stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )
    if done.returncode != 0 or not archive.is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise EngineStartError(f"the class archive could not be made (engines start without it):\n{tail}")
    return archive, True


def find_java_home() -> Path | None:
    """The JVM Spark starts: $JAVA_HOME, else the one ``java`` on PATH resolves to."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(java).resolve().parents[1] if java else None


def engine_command(settings: EngineSettings, socket_path: Path, lease: Path | None = None) -> list[str]:
    command = [sys.executable, "-m", "odf_spark_engine.server", "--socket", str(socket_path)]
    if lease is not None:
        command += ["--lease", str(lease.resolve())]
        if settings.keep_warm:
            command += ["--keep-warm", f"{settings.keep_warm:g}"]
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

    def __init__(self, process: subprocess.Popen, engine_pid: int, run_dir: Path, log_file, *,
                 warm: bool = False):
        self.process = process
        self.engine_pid = engine_pid  # the engine's PID outside the sandbox
        self.run_dir = run_dir
        self.socket_path = run_dir / SOCKET_NAME
        self.log_path = run_dir / LOG_NAME
        self._identity: EngineIdentity | None = None  # known once it answers
        self._log_file = log_file
        if not warm:  # a warm engine outlives this process: it ends by its leases
            atexit.register(self.stop)

    @property
    def identity(self) -> EngineIdentity:
        if self._identity is None:
            raise EngineStartError("the engine has not answered yet")
        return self._identity

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
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        pass_fds=(info_write,),
        start_new_session=True,  # no terminal: Ctrl-C reaches the coordinator, which stops us
        preexec_fn=_die_with_coordinator
        if threading.current_thread() is threading.main_thread() and not settings.keep_warm else None,
    )
    os.close(info_write)
    with os.fdopen(info_read) as info:
        text = info.read()
    if not text:
        process.wait()
        log_file.close()
        raise EngineStartError(f"bubblewrap failed to start the engine; see {run_dir / LOG_NAME}")
    engine = SandboxEngine(process, json.loads(text)["child-pid"], run_dir.resolve(), log_file,
                           warm=bool(settings.keep_warm))
    try:
        engine._identity = _wait_until_ready(engine, settings)
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
