"""A standalone Spark cluster on loopback (one master, one or more workers) from the installed
PySpark.

    with StandaloneCluster(tmp_path / "cluster", workers=2) as cluster:
        cluster.master_url  # spark://127.0.0.1:PORT, with its workers registered

Both daemons run from ``pyspark/bin/spark-class`` (which ``exec``s the JVM, so the PID we hold
is the JVM's) in their own session; ``stop()`` ends each by its PID (SIGTERM, then SIGKILL on its
process group) and is idempotent. Ports are free ones picked just before start, never fixed.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pyspark

from ..support.engines import TEST_JAVA_OPTIONS

SPARK_HOME = Path(pyspark.__file__).resolve().parent
STOP_GRACE_SECONDS = 10


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterError(RuntimeError):
    pass


class StandaloneCluster:
    def __init__(self, work_dir: Path, cores: int = 1, memory: str = "1g", timeout: float = 120.0,
                 workers: int = 1):
        """``cores`` and ``memory``: what each worker offers."""
        self.work_dir = work_dir
        self.cores, self.memory, self.timeout, self.workers = cores, memory, timeout, workers
        self.port = free_port()
        self.webui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}

    # ----- life cycle ---------------------------------------------------------------------

    def start(self) -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn("master", "org.apache.spark.deploy.master.Master",
                        "--host", "127.0.0.1", "--port", str(self.port),
                        "--webui-port", str(self.webui_port))
            self._wait(lambda: self._master_state() is not None, "the master to answer")
            for k in range(self.workers):
                self._spawn(self._worker(k), "org.apache.spark.deploy.worker.Worker", self.master_url,
                            "--host", "127.0.0.1", "--port", str(free_port()),
                            "--webui-port", str(free_port()),
                            "--cores", str(self.cores), "--memory", self.memory,
                            "--work-dir", str(self.work_dir / self._worker(k)))
            self._wait(lambda: self.alive_workers() >= self.workers, "the workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # the workers first, so they do not try to reconnect to a gone master
        for name in [*(self._worker(k) for k in range(self.workers)), "master"]:
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            try:
                os.kill(process.pid, signal.SIGTERM)
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # its own session: pgid == pid
                process.wait()
            except ProcessLookupError:
                pass

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes.values()]

    # ----- state ----------------------------------------------------------------------------

    def alive_workers(self) -> int:
        state = self._master_state()
        return int(state.get("aliveworkers", 0)) if state else 0

    def completed_apps(self) -> list[dict]:
        """Applications that ran on this cluster and ended (name, cores, duration, ...)."""
        state = self._master_state() or {}
        return list(state.get("completedapps", []))

    def log(self, name: str) -> str:
        path = self.work_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _master_state(self) -> dict | None:
        """The master's web UI JSON view, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    # ----- helpers --------------------------------------------------------------------------

    @staticmethod
    def _worker(k: int) -> str:
        """The name (and folder) of worker ``k``; the first is plain "worker"."""
        return "worker" if k == 0 else f"worker-{k + 1}"

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.work_dir), "SPARK_WORKER_DIR": str(self.work_dir / "worker"),
               "SPARK_DAEMON_JAVA_OPTS": TEST_JAVA_OPTIONS}  # the daemons start as the tests' engines do
        env.pop("PYSPARK_GATEWAY_PORT", None)
        with open(self.work_dir / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not ready():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ClusterError(f"the Spark {name} exited ({process.returncode}) while waiting "
                                       f"for {what}:\n{self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {self.timeout:.0f} s waiting for {what}:\n"
                                   + "\n".join(self.log(n)[-2000:] for n in self.processes))
            time.sleep(0.5)
