"""Running the real ``coord`` command in a child process, as a user does (so it can be killed,
locked out, crash, or race another one), or in the test's own process where the process
boundary is not what a test is about.

``coord`` forks each command from a server that has the modules imported (forkserver.py);
``coord_held`` forks one the test holds while it runs (``coord serve``), read and signalled as
a ``Popen``; ``coord_started`` and ``coord_command`` start a fresh interpreter
(``tests.support.entry``), for what a fork cannot be: a process on a terminal, or one that
races another (the fork server forks one command at a time).
Either way the child gets the engine its test chose (``$COORD_TEST_ENGINE``, see engines.py)
and this checkout's code whatever an editable install points at. ``coord_here`` runs the same
``main`` in the test process, with the same answer (exit code, stdout, stderr) and no fork.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from coordinator.engine import factory
from coordinator.workspace import crash

from .engines import ENV, opener_for
from .forkserver import exit_code

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "tests" / "fixtures" / "manifests"


def coord(*args: str, cwd: Path, env: dict | None = None, check: bool = True,
          fake_engine: bool = False, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``coord ARGS`` in ``cwd``; with ``fake_engine`` every engine it opens is the DuckDB
    one of fake_engine.py. ``check``: a non-zero exit fails the test with its stderr."""
    extra = {**(env or {}), **({ENV: "fake"} if fake_engine else {})}
    return _checked(_forked(list(args), Path(cwd), coord_env(extra), timeout), check)


def coord_here(*args: str, cwd: Path, env: dict | None = None, check: bool = True,
               fake_engine: bool = False) -> subprocess.CompletedProcess:
    """``coord ARGS`` as ``coord`` does, but run by ``main`` in this process (in ``cwd``, with
    ``env`` added to the environment, standard streams captured): for the many commands of a
    test that build or read a workspace, where a child process is not what is tested. The
    engine is the test's (none unless ``fake_engine``). A crash point would kill the test
    itself: those commands go through ``coord``."""
    from coordinator.cli.main import main

    assert crash.ENV not in (env or {}), "a command that is killed needs its own process: use coord()"
    before, opener = Path.cwd(), factory._opener
    with CliRunner().isolation(env={"COORD_WORKSPACE": None, **(env or {})}) as (out, err, _):
        try:
            os.chdir(cwd)
            if fake_engine:
                factory.use_engine(opener_for("fake"))
            main(list(args))
            code = 0
        except SystemExit as ended:
            code = exit_code(ended)
        finally:
            factory.use_engine(opener)
            os.chdir(before)
        sys.stdout.flush()
        sys.stderr.flush()
        return _checked(subprocess.CompletedProcess(
            ["coord", *args], code, out.getvalue().decode(), err.getvalue().decode()), check)


def _checked(proc: subprocess.CompletedProcess, check: bool) -> subprocess.CompletedProcess:
    """``proc``; with ``check``, a non-zero exit fails the test with its stderr."""
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(proc.args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


class _ForkServer:
    """This test process's fork server (started on first use, ends with this process)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.forkserver"], cwd=ROOT,
                                     env=coord_env(None), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._buffer = b""
        self.folder = tempfile.TemporaryDirectory(prefix="coord-forked-")  # held commands' output
        self.answer(timeout=120)  # {"ready": true}

    def answer(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"the fork server ended ({self.proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, args: list[str], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="coord-out-") as folder:
            out, err = Path(folder, "out"), Path(folder, "err")
            request = {"args": args, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            pid = self.answer(timeout=30)["pid"]
            try:
                status = self.answer(timeout)["status"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self.answer(timeout=30)
                raise subprocess.TimeoutExpired(["coord", *args], timeout) from None
            return subprocess.CompletedProcess(["coord", *args], status, out.read_text(), err.read_text())


    def hold(self, args: list[str], cwd: Path, env: dict) -> Held:
        folder = Path(tempfile.mkdtemp(prefix="coord-held-", dir=self.folder.name))
        request = {"args": args, "cwd": str(cwd), "env": env, "out": str(folder / "out"),
                   "err": str(folder / "err"), "held": str(folder / "status")}
        for name in ("out", "err"):
            (folder / name).touch()
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        return Held(["coord", *args], self.answer(timeout=30)["pid"], folder)


class Held:
    """A ``coord`` the fork server runs while the test goes on, used as a ``Popen`` is: its
    pid, ``poll``, ``wait``, signals, and its output read as it comes (``stdout``, ``stderr``:
    files the command writes, followed until it has ended)."""

    def __init__(self, args: list[str], pid: int, folder: Path) -> None:
        self.args, self.pid, self.returncode = args, pid, None
        self._status = folder / "status"
        self.stdout, self.stderr = _Followed(folder / "out", self), _Followed(folder / "err", self)

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Followed:
    """What a held command writes to one of its streams, read as a pipe of it would be: a read
    waits for more until the command has ended."""

    def __init__(self, path: Path, held: Held) -> None:
        self._file, self._held = open(path, encoding="utf-8", errors="replace"), held

    def readline(self) -> str:
        line = ""
        while True:
            line += self._file.readline()
            if line.endswith("\n") or (self._held.poll() is not None and not self._more()):
                return line
            time.sleep(0.02)

    def read(self) -> str:
        text = ""
        while self._held.poll() is None:
            text += self._file.read()
            time.sleep(0.02)
        return text + self._file.read()

    def _more(self) -> bool:
        at = self._file.tell()
        more = bool(self._file.read(1))
        self._file.seek(at)
        return more


_server: _ForkServer | None = None


def _fork_server() -> _ForkServer:
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = _ForkServer()
    return _server


def _forked(args: list[str], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return _fork_server().run(args, cwd, env, timeout)


def coord_held(*args: str, cwd: Path, env: dict | None = None) -> Held:
    """``coord ARGS`` forked, running while the test goes on (``coord serve``): as
    ``coord_started`` without a fresh interpreter's start (1.5-2 s of CPU for serve's imports)."""
    return _fork_server().hold(list(args), Path(cwd), coord_env(env))


def coord_started(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """Start ``coord ARGS`` and return at once (to kill it at some moment)."""
    return subprocess.Popen(coord_command(args), cwd=cwd, env=coord_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def coord_command(args) -> list[str]:
    return [sys.executable, "-m", "tests.support.entry", *args]


def coord_env(env: dict | None) -> dict:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("COORD_WORKSPACE", None)
    full_env["PYTHONPATH"] = str(ROOT)  # this checkout, whatever an editable install points at
    return full_env


_RUN_FOLDER_HOLDER = """
import sys, time
from pathlib import Path
from coordinator.workspace.runs import run_folder
run_root, sys.argv = Path(sys.argv[1]), sys.argv[2:]
with run_folder(run_root, "engine") as path:
    print(path, flush=True)
    time.sleep(600)
"""


@contextmanager
def run_folder_holder(run_root: Path, *argv: str) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A child process holding a new run folder under ``run_root`` with ``argv`` as its command
    line, as a running command does: (process, folder). Killed when the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", _RUN_FOLDER_HOLDER, str(run_root), *argv],
                            stdout=subprocess.PIPE, text=True, env=coord_env(None))
    try:
        yield proc, Path(proc.stdout.readline().strip())
    finally:
        proc.kill()
        proc.wait()
