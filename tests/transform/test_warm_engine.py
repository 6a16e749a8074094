"""The warm engine: the first command that needs Spark starts it, the workspace's next commands
use it, and it ends by itself ``engine.keepWarm`` after its last use, however commands end.

Real `coord` commands in a sandboxed workspace, the engine found in the process table; the
derivative's records are checked against the batch answer (pipeline.expected_hourly).
"""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from ..support.cli import coord, coord_started
from .pipeline import HOURLY, LARGE, ORDERS, expected_hourly, order_rows, write_manifests, write_orders_file
from .test_derivative_pull import blocks, records
from .test_engine_lifetime import GONE_WITHIN_SECONDS, _engine_processes, _wait_for

pytestmark = pytest.mark.engine_start
WARM = {"COORD_ENGINE_KEEP_WARM": ""}  # the workspace's engine.keepWarm (tests turn it off)
# Long enough for the two quick commands between two uses of the engine on a busy machine
# (a second or two each), short because the test waits it out once.
KEEP_WARM_SECONDS = 12


def workspace(home: Path, keep_warm: str) -> list[tuple]:
    coord("init", "--odf", "0.18", cwd=home)
    coord("config", "set", "engine.runtime", "sandbox", cwd=home)
    coord("config", "set", "engine.keepWarm", keep_warm, cwd=home)
    rows = order_rows(6)
    write_orders_file(home, "2024-01-01.csv", rows[:12])
    coord("add", str(write_manifests(home)), cwd=home)
    coord("pull", ORDERS, cwd=home)
    return rows


def warm_engines(home: Path) -> list[str]:
    """``coord system engines`` lines of the warm engine: run, runtime, pid, state."""
    listed = coord("system", "engines", cwd=home).stdout.splitlines()
    return [line for line in listed if line.split()[:1] == ["warm"]]


def spark_starts(home: Path) -> int:
    log = home / ".coord" / "run" / "warm" / "engine.log"
    return log.read_text(errors="replace").count("odf_spark_engine: Spark ") if log.exists() else 0


def gone_within(home: Path, deadline: float) -> bool:
    """Whether every engine process of the workspace is gone by ``deadline`` (monotonic)."""
    while _engine_processes(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _engine_processes(home)


def test_the_next_commands_use_the_warm_engine_and_it_ends_after_keep_warm(tmp_path):
    home = tmp_path
    rows = workspace(home, f"{KEEP_WARM_SECONDS}s")
    coord("pull", HOURLY, cwd=home, env=WARM)  # starts it; it stays when the command ends
    [first] = warm_engines(home)
    assert first.split()[1] == "sandbox"
    assert f"warm: idle, ends {KEEP_WARM_SECONDS} s after its last use" in first

    write_orders_file(home, "2024-01-02.csv", rows[12:])
    coord("pull", ORDERS, cwd=home)
    coord("pull", HOURLY, LARGE, cwd=home, env=WARM)  # LARGE: a dataset the first did not read
    last_use = time.monotonic()
    assert warm_engines(home) == [first] and spark_starts(home) == 1
    assert records(home, HOURLY) == expected_hourly(rows, watermark=rows[-1][0])

    assert gone_within(home, last_use + KEEP_WARM_SECONDS + GONE_WITHIN_SECONDS), \
        "the warm engine outlived keepWarm"
    assert time.monotonic() - last_use >= KEEP_WARM_SECONDS, "the warm engine ended before keepWarm"
    assert coord("system", "engines", cwd=home).stdout.strip() == "no engines running for this workspace"


def test_a_killed_command_leaves_the_warm_engine_to_end_by_itself_and_the_rerun_commits_once(tmp_path):
    home = tmp_path
    rows = workspace(home, "5s")
    pull = coord_started("pull", HOURLY, cwd=home, env=WARM)
    log = home / ".coord" / "run" / "warm" / "engine.log"
    _wait_for(lambda: log.exists() and "execute tx=" in log.read_text(errors="replace"), pull)
    pull.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    assert pull.wait() == -signal.SIGKILL
    assert gone_within(home, killed_at + 5 + GONE_WITHIN_SECONDS), "the warm engine outlived keepWarm"
    assert not [b for b in blocks(home, HOURLY) if "inputSlices" in b]

    coord("pull", HOURLY, cwd=home, env=WARM)  # a new warm engine; the killed one's folder is gone
    assert len([b for b in blocks(home, HOURLY) if "inputSlices" in b]) == 1
    assert records(home, HOURLY) == expected_hourly(rows[:12], watermark=rows[11][0])
    assert "stopped 1 engine" in coord("system", "engines", "--stop", cwd=home).stdout
    assert gone_within(home, time.monotonic() + GONE_WITHIN_SECONDS)
