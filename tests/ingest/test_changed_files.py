"""A filesGlob source takes each file once: a file changed after it was ingested is named, once,
with what to do, and its records are still not read again."""
from __future__ import annotations

import os

from coordinator.ingest import pull_root

from ..support.cli import coord
from .conftest import DATASET, add_dataset, rows_of, write

SOURCE = """
source:
  kind: root
  fetch: {kind: filesGlob, path: "in/*.csv"}
  read: {kind: csv, header: true, schema: ["id BIGINT", "name STRING"]}
  merge: %s
"""


def grow(path, line):
    """Append a line and move the modification time on, as a writer a second later would."""
    with open(path, "a") as f:
        f.write(line)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_an_ingested_file_that_grew_is_named_once_and_not_read_again(ws):
    add_dataset(ws, SOURCE % "{kind: append}")
    jan = write(ws.root / "in" / "2020-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    grow(jan, "2,b\n")
    write(ws.root / "in" / "2020-02.csv", "id,name\n3,c\n")
    result = pull_root(ws, DATASET)
    assert result.message == (
        "1 new record; in/2020-01.csv changed after it was ingested and is not read again: a "
        "filesGlob source takes each file once; put new records in a new file (or, to take "
        "changed rows, a ledger or snapshot merge over new files)")
    assert [r["id"] for r in rows_of(ws)] == [1, 3]
    assert pull_root(ws, DATASET).message == "up to date"


def test_an_unchanged_file_is_not_named(ws):
    add_dataset(ws, SOURCE % "{kind: append}")
    write(ws.root / "in" / "2020-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    assert pull_root(ws, DATASET).message == "up to date"


def test_a_lost_cache_names_nothing(ws):
    add_dataset(ws, SOURCE % "{kind: append}")
    jan = write(ws.root / "in" / "2020-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    grow(jan, "2,b\n")
    (ws.meta / "cache" / DATASET / "taken-files.json").unlink()
    assert pull_root(ws, DATASET).message == "up to date"


def test_a_snapshot_source_is_told_to_use_a_new_file(ws):
    add_dataset(ws, SOURCE % "{kind: snapshot, primaryKey: [id]}")
    jan = write(ws.root / "in" / "2020-01.csv", "id,name\n1,a\n")
    pull_root(ws, DATASET)
    grow(jan, "2,b\n")
    assert pull_root(ws, DATASET).message.endswith(
        "in/2020-01.csv changed after it was ingested and is not read again: a filesGlob source "
        "takes each file once; put the new snapshot in a new file")


def test_coord_pull_shows_the_changed_file(ws):
    add_dataset(ws, SOURCE % "{kind: append}")
    jan = write(ws.root / "in" / "2020-01.csv", "id,name\n1,a\n")
    coord("pull", DATASET, cwd=ws.root)
    grow(jan, "2,b\n")
    out = coord("pull", DATASET, cwd=ws.root).stdout
    assert out.startswith(f"{DATASET}: up to date; in/2020-01.csv changed after it was ingested")
