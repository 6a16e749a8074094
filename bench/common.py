"""Small helpers shared by the benchmarks: timing and a printed table."""
from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table


def median_time(
    fn: Callable[[], object], repeat: int = 5, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median time of `repeat` calls of `fn`, in seconds (the machines are noisy).

    Wall time by default; ``clock=time.process_time`` gives CPU time of all threads, which
    is steadier when other work shares the machine.
    """
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def print_table(rows: Sequence[dict], title: str | None = None) -> None:
    """Print dicts as a table; the first row's keys are the columns."""
    table = Table(title=title)
    for key in rows[0]:
        table.add_column(str(key), justify="right" if _is_number(rows[0][key]) else "left")
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key in rows[0]))
    Console(width=max(100, Console().width)).print(table)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


# moto (like some S3-compatible stores) mishandles trailing checksums
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED", "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
}


def start_moto() -> tuple[subprocess.Popen, str]:
    """A moto S3 server on a free loopback port: the process and its ``host:port``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto server did not start")
