"""The chain rules the reference's pull runs (kamu-cli v0.265.0, ``AppendValidation::Full``), run
by coord's pull, verify and push. Each chain here is the reference's layout written by another
writer (``odf39_datasets``: the blocks coord's append path would refuse are sealed and linked
by ``append_unchecked``), its last block breaking one rule:

- pulled from a folder repository, it is refused in one line naming the block and the rule in
  the reference's words, and nothing of it is pulled;
- in a workspace, ``coord verify`` names the same block and rule as an integrity problem, or,
  for the rules coord's own earlier versions broke (``LEGACY``: a transform stored as
  ``query``, which ``coord add`` wrote until it normalized transforms), apart from integrity.

Such a workspace chain still reads, and push refuses to publish it.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace
from coordinator.workspace.config import OdfVersion

from ..support.cli import coord_here
from ..support.odf39_datasets import (
    QUERY,
    SCHEMA,
    SOURCE,
    Written,
    append_unchecked,
    define_legacy_derivative,
    write_root,
)
from .conftest import with_repo

REQUIRED = e.SetDataSchema(schema=d.DataSchema(fields=[
    *SCHEMA.schema.fields, d.DataField(name="country", type=d.DataTypeString())]))
UNNORMALIZED = s.TransformSql(engine="datafusion", query="SELECT * FROM input")

# rule -> (the block that breaks it, given the root; the reference's words in the refusal)
CASES: dict[str, tuple[Callable[[Written], e.MetadataEvent], str]] = {
    "required column": (lambda _: REQUIRED, "New schema is not compatible with the current "
                                            "schema: column 'country' is added as required (String)"),
    "same schema": (lambda _: SCHEMA, "New schema is identical to the current"),
    "query not normalized": (lambda _: e.SetPollingSource(
        fetch=SOURCE.fetch, read=SOURCE.read, preprocess=UNNORMALIZED, merge=SOURCE.merge),
        "Transform queries must be normalized"),
    "disable polling": (lambda _: e.DisablePollingSource(),
                        "Disabling sources is not yet fully supported"),
    "push beside polling": (lambda _: e.AddPushSource(
        source_name="default", read=SOURCE.read, merge=SOURCE.merge),
        "Cannot add a push source while polling source is still active"),
}

# what coord's own earlier versions wrote (a transform as ``query``; a push source added over a
# polling source by ``coord add --replace``): a workspace reads it, verify lists it apart
LEGACY = {"query not normalized", "push beside polling"}


@pytest.fixture(scope="module")
def written_root(tmp_path_factory) -> Path:
    """The root ``cities`` in a repository folder, as the reference lays it out."""
    home = tmp_path_factory.mktemp("rules")
    write_root(home / "repo" / "cities", home / "locks", home / "scratch")
    return home


def broken_copy(written_root: Path, into: Path, rule: str) -> tuple[Path, int, str]:
    """A copy of ``written_root``'s dataset folder at ``into`` with one more block breaking
    ``rule``: the folder, and the block's number and name."""
    shutil.copytree(written_root / "repo" / "cities", into)
    make, _ = CASES[rule]
    head = append_unchecked(into, make(Written(into, None, (), (), ())))  # type: ignore[arg-type]
    return into, 5, str(head)


@pytest.mark.parametrize("rule", CASES)
def test_a_chain_breaking_a_rule_is_refused_at_pull_in_one_line(written_root, tmp_path, rule):
    repo = tmp_path / "repo"
    _, n, head = broken_copy(written_root, repo / "cities", rule)
    other = Workspace.init(tmp_path / "other", odf=OdfVersion.V039)
    with_repo(other, repo.as_uri(), "ref")
    proc = coord_here("pull", "ref/cities", cwd=other.root, check=False)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert f"block {n} ({head}): {CASES[rule][1]}" in proc.stderr
    assert "nothing was pulled" in proc.stderr
    assert not CurrentDataset(other, "cities").exists()


def verified(written_root: Path, tmp_path: Path, rule: str) -> tuple[dict, str]:
    """``coord verify --integrity`` of a workspace holding the broken chain: its report and
    how it names the broken block."""
    ws = Workspace.init(tmp_path / "ws", odf=OdfVersion.V039)
    _, n, head = broken_copy(written_root, CurrentDataset(ws, "cities").root, rule)
    proc = coord_here("verify", "cities", "--integrity", "-o", "json", cwd=ws.root, check=False)
    assert proc.returncode == 1
    [report] = json.loads(proc.stdout)
    return report, f"block {n} ({head}): {CASES[rule][1]}"


@pytest.mark.parametrize("rule", sorted(set(CASES) - LEGACY))
def test_a_chain_breaking_a_rule_fails_verify_naming_the_block(written_root, tmp_path, rule):
    report, problem = verified(written_root, tmp_path, rule)
    assert report["integrity"]["problems"] == [problem]


@pytest.mark.parametrize("rule", sorted(LEGACY))
def test_a_rule_coord_broke_before_fails_verify_apart_from_integrity(written_root, tmp_path, rule):
    report, problem = verified(written_root, tmp_path, rule)
    assert report["integrity"] == {"ok": True, "problems": []}
    [found] = report["referenceRules"]["problems"]
    assert found.startswith(f"{problem}; ")


# --- a transform coord wrote as `query` ---------------------------------------------------------


@pytest.fixture
def legacy(written_root, tmp_path) -> Workspace:
    """A workspace holding ``cities`` and ``large``, a derivative as ``coord add`` wrote one
    before it normalized transforms (its SetTransform, block 1, stores ``query``)."""
    ws = Workspace.init(tmp_path / "ws", odf=OdfVersion.V039)
    shutil.copytree(written_root / "repo" / "cities", CurrentDataset(ws, "cities").root)
    define_legacy_derivative(ws, "large", {"cities": CurrentDataset(ws, "cities").state().id}, QUERY)
    return ws


def test_a_workspace_transform_stored_as_query_still_reads(legacy):
    transform = CurrentDataset(legacy, "large").state().transform
    assert transform is not None and transform.transform.query == QUERY


def test_verify_lists_a_transform_stored_as_query_apart_from_integrity(legacy):
    proc = coord_here("verify", "large", "--integrity", "-o", "json", cwd=legacy.root, check=False)
    assert proc.returncode == 1
    [report] = json.loads(proc.stdout)
    head = CurrentDataset(legacy, "large").head()
    assert report["integrity"] == {"ok": True, "problems": []}
    [problem] = report["referenceRules"]["problems"]
    assert problem.startswith(f"block 1 ({head}): Transform queries must be normalized; ")


def test_push_refuses_a_transform_stored_as_query_saying_what_to_do(legacy, tmp_path):
    proc = coord_here("push", "large", "--to", (tmp_path / "out").as_uri(), cwd=legacy.root,
                      check=False)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert "Transform queries must be normalized" in proc.stderr
    assert "nothing was pushed" in proc.stderr and "coord add" in proc.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))
