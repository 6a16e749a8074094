"""Helpers shared by the tests: running the real ``coord`` (``cli``), the engines a test may
use (``engines``), and the DuckDB test engine (``fake_engine``)."""
