"""``coord sql`` shows nothing of the machine and holds a query to its memory bound."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.query.sql import MemoryExceeded, SqlSession, split_script
from coordinator.workspace import Workspace
from tests.support.cli import coord


@pytest.fixture
def home(tmp_path) -> Path:
    coord("init", cwd=tmp_path)
    return tmp_path


def test_no_duckdb_setting_names_the_home_folder_or_the_workspace(home):
    rows = json.loads(coord("sql", "-o", "json", "-c", "SELECT name, value FROM duckdb_settings()",
                            cwd=home).stdout)
    assert len(rows) > 100
    assert [r for r in rows if str(Path.home()) in str(r["value"]) or str(home) in str(r["value"])] == []


def test_an_error_reading_duckdb_s_extensions_names_no_home_folder(home):
    proc = coord("sql", "-c", "SELECT * FROM duckdb_extensions()", cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert str(Path.home()) not in proc.stderr


def test_a_query_needing_more_than_the_memory_limit_is_refused_in_one_line(home):
    text = "SELECT list(range) AS l FROM range(30000000)"
    with SqlSession(Workspace.open(home), memory_limit=64 << 20) as session:
        with pytest.raises(MemoryExceeded) as refused:
            session.query(split_script(text)[0], text)
    message = str(refused.value)
    assert message.startswith("the query needed more than 64.0 MiB of memory") and "\n" not in message
