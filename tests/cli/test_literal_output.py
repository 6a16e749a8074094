"""Someone else's data is shown as written: a pulled dataset's names and values, a file name or
a query cannot restyle the terminal, make links, turn into emoji or send it control sequences.

One workspace holds a root dataset whose column name and values are markup, emoji codes and
an ESC sequence, read from a file whose name is more of the same, and a derivative (the DuckDB
test engine) whose query quotes them; every command that shows them must exit 0 and show
them literally, control characters escaped.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.workspace import Workspace
from tests.support.cli import coord

HOSTILE = "[/oops] [red]x[/red] [link=https://e.x]y[/link] :smile: \x1b[31mESC\r\a"
SHOWN = "[/oops] [red]x[/red] [link=https://e.x]y[/link] :smile: \\e[31mESC\\r\\a"
FILE = "[bold]b :smile: \x1b[31m.parquet"  # a file name holds no '/'
FILE_SHOWN = "[bold]b :smile: \\e[31m.parquet"
ROOT, DERIVED = "org.example.hostile", "org.example.derived"

MANIFESTS = f"""\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {ROOT}
  source:
    kind: root
    fetch: {{kind: url, url: "[bold]b :smile: \\e[31m.parquet"}}
    read: {{kind: parquet}}
    merge: {{kind: append}}
---
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {DERIVED}
  source:
    kind: derivative
    inputs: [{ROOT}]
    transform:
      kind: sql
      engine: spark
      query: "SELECT *, '[/oops] [red]x[/red] :smile: \\e[31m' AS tag FROM `{ROOT}`"
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile")
    coord("init", "--odf", "0.18", cwd=home)
    pq.write_table(pa.table({HOSTILE: [HOSTILE, "plain"], "n": [1, 2]}), home / FILE)
    for i, text in enumerate(MANIFESTS.split("---\n")):
        (home / f"{i}.yaml").write_text(text)
        coord("add", f"{i}.yaml", cwd=home)
    return home


def shown(home, *args: str, fake_engine: bool = False) -> str:
    """What ``coord ARGS`` prints, which must hold no control character but newlines."""
    proc = coord(*args, cwd=home, fake_engine=fake_engine)
    assert proc.returncode == 0 and proc.stderr == ""
    assert not any(ch < " " and ch != "\n" for ch in proc.stdout), proc.stdout
    return proc.stdout


@pytest.fixture(scope="module")
def pulled(home):
    before = shown(home, "status")  # the file waits to be read: its name is shown
    coord("pull", "-r", DERIVED, cwd=home, fake_engine=True)
    return home, before


def test_status_shows_a_file_name_literally(pulled):
    _, before = pulled
    assert f"({FILE_SHOWN})" in before


def test_tail_shows_names_and_values_literally(pulled):
    home, _ = pulled
    lines = shown(home, "tail", ROOT).splitlines()
    assert SHOWN in lines[0] and SHOWN in lines[1]


def test_sql_shows_names_and_values_literally(pulled):
    home, _ = pulled
    out = shown(home, "sql", "-c", f'SELECT "{HOSTILE}", tag FROM "{DERIVED}" ORDER BY n')
    header, first, *_ = out.splitlines()
    assert SHOWN in header and SHOWN in first
    assert "[/oops] [red]x[/red] :smile: \\e[31m" in first


def test_list_shows_the_datasets(pulled):
    home, _ = pulled
    assert ROOT in shown(home, "list") and DERIVED in shown(home, "list")


def test_log_shows_the_query_literally(pulled):
    home, _ = pulled
    assert "'[/oops] [red]x[/red] :smile: \\e[31m' AS tag" in shown(home, "log", DERIVED)


def test_the_lineage_tree_shows_where_data_comes_from_literally(pulled):
    home, _ = pulled
    tree = shown(home, "lineage", DERIVED)
    assert f"{ROOT} (root, {FILE_SHOWN}, 2 records" in tree


def test_verify_replays_a_query_that_quotes_markup(pulled):
    home, _ = pulled
    out = shown(home, "verify", DERIVED, fake_engine=True)
    assert "integrity: ok" in out and "reproducibility: reproduced" in out


def test_pull_and_verify_show_the_name_a_signer_was_trusted_by_literally(pulled, tmp_path):
    home, _ = pulled
    coord("repo", "add", "shared", (tmp_path / "repo").as_uri(), cwd=home)
    coord("push", ROOT, "--to", "shared", cwd=home)
    coord("init", "--odf", "0.18", cwd=tmp_path)
    coord("repo", "add", "shared", (tmp_path / "repo").as_uri(), cwd=tmp_path)
    key = Workspace.open(home).public_key.hex()
    coord("trust", "add", key, "--name", HOSTILE, cwd=tmp_path)
    signer = f"2 blocks signed by {key} (trusted: {SHOWN})"
    assert f"{key}  {SHOWN}" in shown(tmp_path, "trust", "list")
    assert signer in shown(tmp_path, "pull", f"shared/{ROOT}")
    assert signer in shown(tmp_path, "verify", ROOT)


@pytest.mark.spark
def test_provenance_and_the_field_lineage_tree_show_names_and_values_literally(pulled):
    home, _ = pulled
    spark = "org.example.spark"
    doc = yaml.safe_load(MANIFESTS.split("---\n")[1])
    doc["content"]["id"] = spark
    name = HOSTILE.replace(".", "")  # the engine reads a dot in an output column's name as a path
    query = f"SELECT event_time, n, '{HOSTILE}' AS `{name}` FROM `{ROOT}`"
    doc["content"]["source"]["transform"]["query"] = query
    (home / "spark.yaml").write_text(yaml.safe_dump(doc))
    coord("add", "spark.yaml", cwd=home)
    coord("pull", spark, cwd=home)
    head = Workspace.open(home).dataset(spark).head().hex()

    provenance = shown(home, "provenance", spark, "--block", head, "--row", "0")
    assert f"{SHOWN.replace('.', '')}={SHOWN}" in provenance  # a column and value of the record
    assert f"{SHOWN}={SHOWN}" in provenance  # and of its input record
    assert f"{spark}.{SHOWN.replace('.', '')}" in shown(home, "lineage", spark, "--field", name)
