"""Fixtures of the derivative tests."""
from __future__ import annotations

import pytest

from ..support import engines


@pytest.fixture(scope="module")
def engine_env(shared_engine) -> dict:
    """The environment a module fixture's ``coord`` commands need to use the shared engine: the
    test's own setting (tests/conftest.py) comes after module fixtures, and without it each
    command would start an engine of its own."""
    return {engines.ENV: f"attach:{shared_engine}"}
