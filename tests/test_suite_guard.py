"""The suite's guard: a test not marked `spark` or `engine_start` cannot start an engine, in
its own process or in a `coord` it runs (tests/conftest.py, tests/support/engines.py)."""
from __future__ import annotations

import pytest

from coordinator.engine import factory
from coordinator.engine.settings import EngineSettings

from .support import engines
from .support.cli import coord

# A root whose preprocess step runs in the engine.
ROOT_WITH_PREPROCESS = """
apiVersion: 1
kind: DatasetSnapshot
content:
  id: t.preprocessed
  source:
    kind: root
    fetch: {kind: url, url: x.csv}
    read: {kind: csv, schema: ['a INT']}
    merge: {kind: append}
    preprocess: {kind: sql, engine: spark, query: SELECT * FROM input}
"""


def test_a_coord_process_of_an_unmarked_test_that_needs_an_engine_ends_at_once(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    (tmp_path / "root.yaml").write_text(ROOT_WITH_PREPROCESS)
    (tmp_path / "x.csv").write_text("1\n")
    coord("add", "root.yaml", cwd=tmp_path)

    proc = coord("pull", "t.preprocessed", cwd=tmp_path, check=False)

    assert proc.returncode == engines.REFUSED_EXIT and engines.REFUSAL in proc.stderr


def test_an_engine_opened_in_the_test_process_fails_the_test_even_if_caught(tmp_path):
    with pytest.raises(engines.EngineRefused):
        with factory.open_engine(EngineSettings(runtime="sandbox"), tmp_path, []):
            pass
    assert engines.refusals  # what the teardown of every test checks
    engines.refusals.clear()  # (this test wanted the refusal)
