"""``coord ingest`` of a JSON document (``ReadStepJson``: an array of records, at the top or under
``subPath``) into a 0.39 root: the records stored are the array's (in the slice's canonical
order, so compared by id), as Python's ``json`` reads the same file; a bad record is named by
file, row (its place in the array) and column, and a document that is not one the source reads
is refused in one line naming the file."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.push import push_source, root_manifest

# ``name`` holds a null (RECORDS): declared an Option, as the reference refuses a null in a
# field declared without one
SCHEMA = ("schema: {fields: [{name: id, type: {kind: Int64}}, "
          "{name: name, type: {kind: Option, inner: {kind: String}}}, "
          "{name: score, type: {kind: Float64}}]}")


def home_with(tmp_path: Path, sub_path: str | None) -> Path:
    """A 0.39 workspace whose root ``scores`` reads JSON (under ``sub_path``) by push."""
    coord("init", "--odf", "0.39", ".", cwd=tmp_path)
    at = f", subPath: {json.dumps(sub_path)}" if sub_path else ""
    (tmp_path / "scores.yaml").write_text(root_manifest(
        "scores", push_source("json", f"{{kind: Json, {SCHEMA}{at}}}")))
    coord("add", "scores.yaml", cwd=tmp_path)
    return tmp_path


def stored(home: Path) -> list[dict]:
    ds = CurrentDataset(Workspace.open(home), "scores")
    tables = [pq.read_table(ds.data_file(r.slice), columns=["id", "name", "score"])
              for r in ds.state().slices]
    return by_id(pa.concat_tables(tables).to_pylist())


def by_id(records: list[dict]) -> list[dict]:
    return sorted(records, key=lambda r: r["id"])


def refusal(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    return line


RECORDS = [{"id": 9_007_199_254_740_993, "name": "Zoë \"Z\"\n", "score": 0.1},  # 2**53 + 1
           {"id": 2, "name": None, "score": 1e300}, {"id": 3, "name": "b", "score": -0.0}]


def test_a_top_level_array_is_stored_record_for_record(tmp_path):
    home = home_with(tmp_path, None)
    (home / "a.json").write_text(json.dumps(RECORDS, ensure_ascii=False))
    coord("ingest", "scores", "a.json", cwd=home)
    assert stored(home) == by_id(json.loads((home / "a.json").read_text()))


def test_an_array_under_a_sub_path_is_stored_and_the_rest_of_the_document_ignored(tmp_path):
    home = home_with(tmp_path, "data.scores")
    doc = {"meta": {"n": 3}, "data": {"scores": RECORDS, "other": [{"id": 7}]}}
    (home / "a.json").write_text(json.dumps(doc))
    coord("ingest", "scores", "a.json", cwd=home)
    assert stored(home) == by_id(RECORDS)


def test_a_key_with_a_slash_or_a_tilde_is_one_step_of_the_sub_path(tmp_path):
    home = home_with(tmp_path, "a/b.c~d")
    (home / "a.json").write_text(json.dumps({"a/b": {"c~d": RECORDS[1:]}, "a": {"b": []}}))
    coord("ingest", "scores", "a.json", cwd=home)
    assert stored(home) == by_id(RECORDS[1:])


def test_a_bad_record_is_named_by_file_row_and_column_and_nothing_is_committed(tmp_path):
    home = home_with(tmp_path, None)
    (home / "bad.json").write_text(json.dumps([RECORDS[2], {"id": "three", "name": "c",
                                                             "score": 1}]))
    line = refusal(coord("ingest", "scores", "bad.json", cwd=home, check=False))
    assert "bad.json" in line and "id" in line and ("row 2" in line or ":2:" in line), line
    assert not CurrentDataset(Workspace.open(home), "scores").state().slices


@pytest.mark.parametrize(("sub_path", "text", "says"), [
    (None, '[{"id": 1},', "bad.json: not JSON: "),  # then the parser's words
    (None, '{"scores": []}', "bad.json: expected an array of records"),
    ("data.scores", '{"data": {"rows": []}}', "bad.json: no 'data.scores' in the document"),
    ("data.scores", '{"data": [{"scores": []}]}', "bad.json: no 'data.scores' in the document"),
    ("data.scores", '{"data": {"scores": 1}}', "bad.json: expected an array of records at "
                                               "'data.scores'"),
], ids=["truncated", "an-object", "no-key", "an-array-on-the-way", "not-an-array"])
def test_a_document_the_source_cannot_read_is_refused_in_one_line(tmp_path, sub_path, text, says):
    home = home_with(tmp_path, sub_path)
    (home / "bad.json").write_text(text)
    line = refusal(coord("ingest", "scores", "bad.json", cwd=home, check=False))
    assert line.startswith(f"coord: error: {says}"), line
