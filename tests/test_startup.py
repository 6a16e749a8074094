"""Start-up cost: a command imports only what it needs (the every-day commands must stay fast)."""
from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT

HEAVY = ("pyarrow", "pandas", "jsonschema", "grpc", "boto3", "docker", "pyspark", "duckdb", "fastapi",
         "uvicorn", "watchfiles")

PROBE = """
import io, json, sys
from contextlib import redirect_stdout
from coordinator.cli.main import main
with redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in HEAVY if m in sys.modules)))
"""


def imported_by(*args: str) -> list[str]:
    code = f"HEAVY = {HEAVY!r}\n{PROBE}"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_help_imports_no_data_schema_engine_or_cloud_library():
    assert imported_by("--help") == []


def test_a_subcommands_help_imports_none_either():
    assert imported_by("pull", "--help") == []
