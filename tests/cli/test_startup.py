"""Start-up cost: a command imports only what it needs (the every-day commands must stay fast).

Each probe runs the real CLI in a fresh interpreter and reports which of the costly libraries
it imported. What each command may import follows from what it does: ``--help`` parses
arguments (click only); ``list``, ``status`` and a pull that finds nothing new read metadata
chains and no data (and the Ed25519 primitive only for signatures no earlier command found
valid); ``log`` reads them too, and prints through rich; a pull that ingests data uses Arrow
but never pandas; ``verify --integrity`` reads data files but loads nothing that replays.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT, coord

# data, schema, engine and cloud libraries: no metadata command needs any of them
HEAVY = ("pyarrow", "pandas", "numpy", "jsonschema", "grpc", "boto3", "docker", "pyspark", "duckdb",
         "flatbuffers", "fastapi", "uvicorn", "watchfiles")
# what the printing and key handling of a metadata command need not load either
LIGHT_ONLY = HEAVY + ("rich", "cryptography.hazmat.primitives.serialization")

PROBE = """
import io, json, sys
from contextlib import redirect_stdout
from coordinator.cli.main import main
code = 0
with redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
print(json.dumps([code, sorted(m for m in WATCHED if m in sys.modules)]))
"""


def imported_by(*args: str, cwd: Path | None = None, watched=HEAVY) -> list[str]:
    code = f"WATCHED = {watched!r}\n{PROBE}"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True, cwd=cwd)
    code, imported = json.loads(done.stdout.splitlines()[-1])
    assert code in (0, None), done.stderr
    return imported


def test_help_imports_no_data_schema_engine_or_cloud_library():
    assert imported_by("--help", watched=LIGHT_ONLY + ("yaml",)) == []


def test_a_subcommands_help_imports_none_either():
    assert imported_by("pull", "--help", watched=LIGHT_ONLY + ("yaml",)) == []


def cities_workspace(home: Path, odf: str) -> Path:
    """A workspace of ``odf`` with one root dataset (two CSV files, event time from their names)."""
    (home / "data").mkdir()
    (home / "data" / "2024-01-01.csv").write_text("city,population\nOslo,709000\nBergen,291000\n")
    (home / "data" / "2024-01-02.csv").write_text("city,population\nOslo,709500\nTromso,77000\n")
    (home / "cities.yaml").write_text("""\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: cities
  source:
    kind: root
    fetch:
      kind: filesGlob
      path: data/*.csv
      eventTime: {kind: fromPath, pattern: '(\\d{4}-\\d{2}-\\d{2})\\.csv$'}
    read: {kind: csv, header: true, schema: [city STRING, population BIGINT]}
    merge: {kind: append}
""")
    coord("init", "--odf", odf, cwd=home)
    coord("add", "cities.yaml", cwd=home)
    return home


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    """The 0.18 cities workspace, shared by the tests below (the first one pulls)."""
    return cities_workspace(tmp_path_factory.mktemp("startup"), "0.18")


def test_ingesting_a_csv_never_imports_pandas(ingested):
    (ingested / "data" / "2024-01-03.csv").write_text("city,population\nOslo,710000\n")
    assert imported_by("pull", "cities", cwd=ingested, watched=("pandas", "pyarrow")) == ["pyarrow"]
    listed = coord("list", cwd=ingested).stdout.splitlines()
    assert next(line for line in listed if line.startswith("cities")).split()[4] == "5"  # records


def test_a_csv_pull_into_a_current_root_loads_no_json_reader_or_numpy_masks(tmp_path):
    home = cities_workspace(tmp_path, "0.39")
    assert imported_by("pull", "cities", cwd=home,
                       watched=("pyarrow.csv", "pyarrow.json", "numpy.ma")) == ["pyarrow.csv"]


@pytest.mark.parametrize("command", [["list"], ["status"], ["pull", "cities"]])
def test_metadata_commands_read_no_data_and_print_without_rich(ingested, command):
    coord("pull", "cities", cwd=ingested)  # nothing new after this: the pull probe reads metadata only
    assert imported_by(*command, cwd=ingested, watched=LIGHT_ONLY) == []


@pytest.mark.parametrize("command", [["list"], ["status"], ["pull", "cities"]])
def test_metadata_commands_check_no_signature_an_earlier_command_found_valid(ingested, command):
    coord("pull", "cities", cwd=ingested)  # its chain walk checks every signature once
    assert imported_by(*command, cwd=ingested, watched=("cryptography",)) == []


@pytest.mark.parametrize("command", [["log", "cities"], ["log", "cities", "-o", "json"]])
def test_log_reads_no_data_and_needs_no_schema_or_engine(ingested, command):
    assert imported_by(*command, cwd=ingested) == []


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> Path:
    """The cities workspace in current ODF (0.39), pulled: its blocks signed by the workspace."""
    home = cities_workspace(tmp_path_factory.mktemp("current"), "0.39")
    coord("pull", "cities", cwd=home)
    return home


# what a current-ODF chain's readers need not load either: YAML (they write and read no
# manifest), the engine port's request types, the append path, HTTP dates, the engine modules
CHAIN_READERS_SKIP = LIGHT_ONLY + ("yaml", "coordinator.engine.port", "coordinator.engine.warm",
                                   "coordinator.workspace.commit", "email.utils")


@pytest.mark.parametrize("command", [["list"], ["status"], ["list", "-o", "json"], ["status", "cities"]])
def test_current_odf_list_and_status_load_no_yaml_engine_or_append_path(current, command):
    assert imported_by(*command, cwd=current, watched=CHAIN_READERS_SKIP) == []


def test_current_odf_log_checks_no_signature_an_earlier_command_found_valid(current):
    coord("log", "cities", cwd=current)  # checks each signature once, and keeps what it found
    assert imported_by("log", "cities", cwd=current, watched=("cryptography",)) == []
    # YAML it needs, for the trusted keys of config.yaml
    assert imported_by("log", "cities", "-o", "json", cwd=current,
                       watched=tuple(m for m in CHAIN_READERS_SKIP if m != "yaml")) == []


def test_a_current_odf_pull_with_nothing_new_reads_no_data(current):
    coord("pull", "cities", cwd=current)  # nothing new after this: the probe reads metadata only
    assert imported_by("pull", "cities", cwd=current, watched=LIGHT_ONLY) == []


def test_a_current_odf_pull_with_nothing_new_loads_no_signing_primitive(current):
    coord("pull", "cities", cwd=current)  # nothing new after this; its signatures are known valid
    assert imported_by("pull", "cities", cwd=current, watched=("cryptography",)) == []


def test_verify_integrity_reads_data_files_but_loads_no_engine_or_replay(ingested):
    engine_side = ("grpc", "coordinator.engine.session", "coordinator.transform.replay",
                   "coordinator.build.current_derivative", "pyarrow")
    assert imported_by("verify", "--integrity", "cities", cwd=ingested,
                       watched=engine_side) == ["pyarrow"]  # Parquet footers
