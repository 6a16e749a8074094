"""Helpers shared by the tests: running the real ``coord`` (``cli``), the engines a test may
use (``engines``), the DuckDB test engine (``fake_engine``), and changing a dataset's files
behind its back (``tamper``)."""
