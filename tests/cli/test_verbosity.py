"""-q: results and errors only; -v: also how each step went. Data output is the same in both."""
from __future__ import annotations

import gzip
import signal

import pytest

from tests.support.cli import MANIFESTS, coord, run_folder_holder

ORDERS = "com.example.orders"


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "orders-2024-01-01.csv.gz").write_bytes(gzip.compress(
        b"order_id,customer,amount,placed_at\n1,ann,9.50,2024-01-01T10:00:00Z\n"))
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=tmp_path)
    return tmp_path


def abandon_a_run_folder(home):
    """What a command killed mid-run leaves: the next command removes it and says so."""
    with run_folder_holder(home / ".coord" / "run", "coord", "pull", ORDERS) as (proc, _):
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_quiet_shows_the_results_but_no_notes(home):
    abandon_a_run_folder(home)
    done = coord("-q", "pull", ORDERS, cwd=home)
    assert done.stderr == "" and done.stdout.startswith(f"{ORDERS}: ")
    abandon_a_run_folder(home)
    assert "removed 1 run folder" in coord("list", cwd=home).stderr


def test_quiet_still_shows_errors(home):
    done = coord("-q", "pull", "no.such.dataset", cwd=home, check=False)
    assert done.returncode == 1 and done.stderr.startswith("coord: error: ")


def test_verbose_shows_each_step_and_the_same_results(home):
    done = coord("-v", "pull", ORDERS, cwd=home)
    assert done.stdout.startswith(f"{ORDERS}: ")
    assert done.stderr.startswith(f"{ORDERS}: ")  # what it reads, as it starts
    assert coord("-v", "list", cwd=home).stdout == coord("list", cwd=home).stdout


def test_quiet_and_verbose_together_are_refused(home):
    done = coord("-q", "-v", "list", cwd=home, check=False)
    assert done.returncode == 2 and "-q and -v say opposite things" in done.stderr
