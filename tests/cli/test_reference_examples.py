"""The reference's own example manifests (tests/fixtures/manifests/reference: all 54 of kamu-cli
v0.265.0's examples/) in a default (ODF 0.39) workspace: each example folder's manifests added
with ``coord add``, which adds them or refuses them in one line naming what is missing; an input
read under an alias other than its name; inputs named ``account/name``."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.json as pajson
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import MANIFESTS, coord_here
from ..support.push import LEADERBOARD

REFERENCE = MANIFESTS / "reference"

# what is refused, by file: the fetch kinds coord does not run (Mqtt, EthereumLogs), and the
# datasets reading them
REFUSED = {
    "mqtt/temp.yaml": "content.metadata[0].fetch: fetch kind Mqtt is not supported by coord yet "
                      "(coord fetches Url, FilesGlob and Container sources)",
    "reth-vs-snp500/net.rocketpool.reth.tokens-minted.yaml":
        "content.metadata[0].fetch: fetch kind EthereumLogs is not supported by coord yet (coord "
        "fetches Url, FilesGlob and Container sources)",
    "reth-vs-snp500/net.rocketpool.reth.tokens-burned.yaml":
        "content.metadata[0].fetch: fetch kind EthereumLogs is not supported by coord yet (coord "
        "fetches Url, FilesGlob and Container sources)",
    "reth-vs-snp500/net.rocketpool.reth.mint-burn.yaml": "input net.rocketpool.reth.tokens-minted",
    "reth-vs-snp500/account.tokens.portfolio.market-value.yaml":
        "input net.rocketpool.reth.mint-burn",
}


def add_each(folder: Path, home: Path) -> dict[str, str]:
    """Each manifest under ``folder`` added on its own, again while that adds more (inputs
    first); what each last said: "added" or its error line."""
    coord_here("init", cwd=home)
    pending = sorted(folder.rglob("*.yaml"))
    said: dict[str, str] = {}
    while pending:
        before = len(pending)
        for path in list(pending):
            proc = coord_here("add", str(path), cwd=home, check=False)
            key = str(path.relative_to(REFERENCE))
            if proc.returncode == 0:
                said[key] = "added"
                pending.remove(path)
            else:
                [said[key]] = proc.stderr.splitlines()
        if len(pending) == before:
            break
    return said


@pytest.mark.parametrize("example", sorted(p.name for p in REFERENCE.iterdir() if p.is_dir()))
def test_each_example_is_added_or_refused_in_one_line_naming_what_is_missing(example, tmp_path):
    said = add_each(REFERENCE / example, tmp_path)
    for key, outcome in said.items():
        if key in REFUSED:
            assert outcome.startswith("coord: error: ") and REFUSED[key] in outcome, outcome
        else:
            assert outcome == "added", outcome


def test_49_of_the_54_examples_are_added():
    assert len(list(REFERENCE.rglob("*.yaml"))) == 54
    assert len(REFUSED) == 5


ALIASED = """\
kind: DatasetSnapshot
version: 1
content:
  name: top-scores
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {ref}
          alias: player_scores
      transform:
        kind: Sql
        engine: spark
        query: SELECT match_time, match_id, player_id, score FROM player_scores WHERE score >= 80
    - kind: SetVocab
      eventTimeColumn: match_time
"""


@pytest.fixture
def scores(tmp_path) -> Path:
    """A default workspace with the leaderboard example's push-fed root and its first file."""
    coord_here("init", cwd=tmp_path)
    coord_here("add", str(REFERENCE / "leaderboard" / "player-scores.yaml"), cwd=tmp_path)
    coord_here("ingest", "player-scores", str(LEADERBOARD / "data" / "1.ndjson"), cwd=tmp_path)
    return tmp_path


def high_scores_by_pyarrow() -> list[tuple[int, str, int]]:
    table = pajson.read_json(LEADERBOARD / "data" / "1.ndjson")
    table = table.filter(pc.greater_equal(table["score"], 80))
    return sorted(zip(*(table[c].to_pylist() for c in ("match_id", "player_id", "score")), strict=True))


def pulled_rows(home: Path) -> list[tuple[int, str, int]]:
    rows = json.loads(coord_here("tail", "top-scores", "-n", "100", "-o", "json", cwd=home).stdout)
    return sorted((r["match_id"], r["player_id"], r["score"]) for r in rows)


def test_an_input_is_read_by_the_query_under_its_alias(scores):
    (scores / "top.yaml").write_text(ALIASED.format(ref="player-scores"))
    coord_here("add", "top.yaml", cwd=scores)
    coord_here("pull", "top-scores", cwd=scores, fake_engine=True)
    assert pulled_rows(scores) == high_scores_by_pyarrow()


def test_an_aliased_input_is_stored_by_its_id_with_the_alias(scores):
    (scores / "top.yaml").write_text(ALIASED.format(ref="player-scores"))
    coord_here("add", "top.yaml", cwd=scores)
    ws = Workspace.open(scores)
    [given] = CurrentDataset(ws, "top-scores").state().transform.inputs
    assert (given.dataset_ref, given.alias) == (str(CurrentDataset(ws, "player-scores").state().id),
                                                "player_scores")


def test_an_input_of_an_account_is_the_workspaces_dataset_of_that_name_with_a_note(scores):
    (scores / "top.yaml").write_text(ALIASED.format(ref="alice/player-scores"))
    added = coord_here("add", "top.yaml", cwd=scores)
    assert added.stderr == ("top.yaml: content.metadata[0].inputs[0].datasetRef: "
                            "alice/player-scores is read as this workspace's dataset player-scores "
                            "(a workspace has no accounts)\n")
    coord_here("pull", "top-scores", cwd=scores, fake_engine=True)
    assert pulled_rows(scores) == high_scores_by_pyarrow()


def test_an_input_of_an_account_the_workspace_lacks_is_refused_naming_the_account(tmp_path):
    shutil.copy(REFERENCE / "private-datasets" / "snapshots" / "alice" / "2priv.yaml", tmp_path)
    coord_here("init", cwd=tmp_path)
    refused = coord_here("add", "2priv.yaml", cwd=tmp_path, check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        "coord: error: 2priv.yaml: content.metadata[0].inputs[0].datasetRef: alice/1pub1 is the "
        "dataset 1pub1 of the account alice; this workspace (which has no accounts) has no dataset "
        "1pub1: add 1pub1 first (coord add its manifest, or coord pull it from a repository)\n")
    assert coord_here("list", cwd=tmp_path).stdout.count("\n") == 1  # the header: nothing added


def test_an_alias_is_refused_in_an_odf_0_18_workspace(tmp_path):
    coord_here("init", "--odf", "0.18", cwd=tmp_path)
    refused = coord_here("add", str(REFERENCE / "leaderboard" / "leaderboard.yaml"), cwd=tmp_path,
                         check=False)
    assert "alias: an alias (player_scores) other than the input's name is not supported by ODF " \
           "0.18 workspaces yet" in refused.stderr

