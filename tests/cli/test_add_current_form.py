"""``coord add`` of manifests in the current ODF form (the reference's, kamu-cli v0.265.0
examples/): added and pulled as the 0.18 datasets they describe, notes for what is left out,
errors named where the file says it. The commands run in the test process (``coord_here``) but
for the refused one, which runs as a ``coord`` process."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli import MANIFESTS, coord, coord_here

REFERENCE = MANIFESTS / "reference"
TRANSACTIONS = "my.trading.transactions"


@pytest.fixture
def home(tmp_path):
    """A workspace beside the data folder of the reference's currency_conversion example."""
    shutil.copytree(REFERENCE / "currency_conversion" / "data", tmp_path / "data")
    coord_here("init", "--odf", "0.18", cwd=tmp_path)
    return tmp_path


def test_a_reference_root_is_added_and_pulled_from_its_local_file(home):
    added = coord_here("add", str(REFERENCE / "currency_conversion" / f"{TRANSACTIONS}.yaml"), cwd=home)
    assert added.stdout.startswith(f"added     {TRANSACTIONS} ") and added.stderr == ""
    coord_here("pull", TRANSACTIONS, cwd=home)
    rows = json.loads(coord_here("tail", TRANSACTIONS, "-n", "1", "-o", "json", cwd=home).stdout)
    assert [{k: row[k] for k in ("symbol", "quantity", "price", "currency")} for row in rows] == [
        {"symbol": "SPY", "quantity": 1, "price": 311.64, "currency": "USD"}]  # the file's last line
    listed = json.loads(coord_here("list", "-o", "json", cwd=home).stdout)
    assert [(d["id"], d["records"]) for d in listed] == [(TRANSACTIONS, 36)]


def test_a_derivative_in_the_current_form_is_computed_from_its_input(home):
    (home / "expensive.yaml").write_text(f"""\
kind: DatasetSnapshot
version: 1
content:
  name: my.trading.expensive
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {TRANSACTIONS}
      transform:
        kind: Sql
        engine: spark
        query: SELECT event_time, symbol, price FROM `{TRANSACTIONS}` WHERE price > 300
""")
    coord_here("add", str(REFERENCE / "currency_conversion" / f"{TRANSACTIONS}.yaml"), "expensive.yaml",
               cwd=home)
    coord_here("pull", "-r", "my.trading.expensive", cwd=home, fake_engine=True)
    rows = json.loads(coord_here("tail", "my.trading.expensive", "-o", "json", cwd=home).stdout)
    assert sorted(row["price"] for row in rows) == [306.14, 311.64]


def test_descriptive_events_left_out_are_noted_and_the_dataset_is_added(home):
    path = REFERENCE / "covid" / "alberta.case-details.yaml"
    added = coord_here("add", str(path), cwd=home)
    assert "covid19.alberta.case-details" in added.stdout
    assert [line.split(": ")[1] for line in added.stderr.splitlines()] == [
        "content.metadata[2]", "content.metadata[3]", "content.metadata[4]"]
    assert "SetLicense left out" in added.stderr


def test_a_refused_manifest_is_one_line_naming_its_place_and_adds_nothing(home):
    path = REFERENCE / "leaderboard" / "player-scores.yaml"
    proc = coord("add", str(path), cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr == ("coord: error: dataset player-scores: an ODF 0.18 dataset has no push "
                           "sources; make a 0.39 workspace (coord init --odf 0.39) or upgrade the "
                           "0.18 datasets first (coord upgrade)\n")
    assert coord_here("list", cwd=home).stdout.count("\n") == 1  # the header: nothing was added


def test_a_derivatives_problem_is_named_where_the_current_form_says_it(home):
    (home / "daily.yaml").write_text(f"""\
kind: DatasetSnapshot
version: 1
content:
  name: my.trading.daily
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{{datasetRef: {TRANSACTIONS}}}]
      transform:
        kind: Sql
        engine: spark
        query: SELECT 1
        temporalTables: [{{name: other, primaryKey: [symbol]}}]
""")
    proc = coord_here("add", str(REFERENCE / "currency_conversion" / f"{TRANSACTIONS}.yaml"), "daily.yaml",
                 cwd=home, check=False)
    assert proc.stderr.startswith("coord: error: daily.yaml: "
                                  "content.metadata[0].transform.temporalTables[0].name: "
                                  "other is not an input of this dataset")
