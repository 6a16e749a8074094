"""A new current-ODF (0.39) root records the nullability its read step declares, as the
reference (kamu-cli 0.265) reads and records it: a current-form field whose type is not an
``Option`` is required (``DataSchema::to_arrow``); of a DDL schema the columns declared
``NOT NULL`` and the ``DATE`` and ``DECIMAL(p,s)`` ones are required, every other one optional
(``parse_ddl_to_odf_schema``);
the offset, operation type, system time and event time are always required. A null in a
required column is refused, as the reference's reader refuses it, here in one line naming the
file, the row and the column. A dataset whose schema already records a column optional keeps
it so, and keeps taking nulls in it.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from coordinator.metadata.odf39 import events as e
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord, coord_here

NAME = "cities"
SYSTEM = {"offset": False, "op": False, "system_time": False, "at": False}


def manifest(home: Path, read_schema: str) -> Path:
    path = home / "cities.yaml"
    path.write_text(textwrap.dedent("""\
        kind: DatasetSnapshot
        version: 1
        content:
          name: cities
          kind: Root
          metadata:
            - kind: SetPollingSource
              fetch: {kind: FilesGlob, path: "in/*.csv"}
              read:
                kind: Csv
                header: true
        %s
              merge: {kind: Append}
            - kind: SetVocab
              eventTimeColumn: at
        """) % textwrap.indent(textwrap.dedent(read_schema), " " * 8))
    return path


CURRENT = """\
    schema:
      fields:
        - {name: id, type: {kind: Int64}}
        - {name: at, type: {kind: Timestamp}}
        - {name: city, type: {kind: Option, inner: {kind: String}}}
"""
OPTIONAL_ID = CURRENT.replace("{kind: Int64}", "{kind: Option, inner: {kind: Int64}}")


def added(home: Path, read_schema: str) -> None:
    coord_here("init", "--odf", "0.39", ".", cwd=home)
    coord_here("add", str(manifest(home, read_schema)), cwd=home)


def csv(home: Path, name: str, text: str) -> None:
    (home / "in").mkdir(exist_ok=True)
    (home / "in" / name).write_text(text)


def nullable(home: Path) -> dict[str, bool]:
    """Each column of the schema in force: whether it is nullable."""
    doc = json.loads(coord_here("schema", NAME, "-o", "json", cwd=home).stdout)
    return {c["name"]: c["nullable"] for c in doc["inForce"]["columns"]}


def data_blocks(home: Path) -> int:
    ds = CurrentDataset(Workspace.open(home), NAME)
    return sum(1 for b in ds.state().blocks
               if isinstance(b.block.event, e.AddData) and b.block.event.new_data is not None)


def test_a_field_declared_without_option_is_recorded_required_as_the_reference_does(tmp_path):
    added(tmp_path, CURRENT)
    csv(tmp_path, "a.csv", "id,at,city\n1,2024-01-01T10:00:00Z,Oslo\n2,2024-01-02T10:00:00Z,\n")
    coord("pull", NAME, cwd=tmp_path)
    assert nullable(tmp_path) == {**SYSTEM, "id": False, "city": True}


def test_ddl_columns_are_recorded_optional_but_date_and_decimal_ones_required(tmp_path):
    added(tmp_path, """\
        ddlSchema: ["id BIGINT", "at TIMESTAMP", "city STRING", "founded DATE",
                    "area DECIMAL(10,2)", "mayor STRING"]
        """)
    csv(tmp_path, "a.csv", "id,at,city,founded,area,mayor\n"
                           "1,2024-01-01T10:00:00Z,Oslo,1048-01-01,454.12,\n")
    coord("pull", NAME, cwd=tmp_path)
    assert nullable(tmp_path) == {**SYSTEM, "id": True, "city": True, "founded": False,
                                  "area": False, "mayor": True}


NOT_NULL_DDL = '''\
    ddlSchema: ["id BIGINT NOT NULL", "at TIMESTAMP", "city STRING not null", "mayor STRING"]
    '''


def test_ddl_columns_declared_not_null_are_recorded_required_as_the_reference_does(tmp_path):
    added(tmp_path, NOT_NULL_DDL)
    csv(tmp_path, "a.csv", "id,at,city,mayor\n1,2024-01-01T10:00:00Z,Oslo,\n")
    coord("pull", NAME, cwd=tmp_path)
    assert nullable(tmp_path) == {**SYSTEM, "id": False, "city": False, "mayor": True}


def test_a_null_in_a_ddl_column_declared_not_null_is_refused_naming_the_row_and_column(tmp_path):
    added(tmp_path, NOT_NULL_DDL)
    csv(tmp_path, "a.csv", "id,at,city,mayor\n1,2024-01-01T10:00:00Z,Oslo,\n"
                           "2,2024-01-02T10:00:00Z,,Ana\n")
    failed = coord("pull", NAME, cwd=tmp_path, check=False)
    (line,) = failed.stderr.strip().splitlines()
    assert "a.csv: row 2: column 'city' is null, but the read step declares it NOT NULL" in line
    assert data_blocks(tmp_path) == 0


def test_a_null_in_a_column_declared_required_is_refused_naming_the_file_row_and_column(tmp_path):
    added(tmp_path, CURRENT)
    csv(tmp_path, "a.csv", "id,at,city\n1,2024-01-01T10:00:00Z,Oslo\n,2024-01-02T10:00:00Z,Lima\n")
    failed = coord("pull", NAME, cwd=tmp_path, check=False)
    assert failed.returncode != 0
    (line,) = failed.stderr.strip().splitlines()
    assert "a.csv: row 2: column 'id' is null, but the read step declares it Int64, not an " \
           "Option" in line
    assert data_blocks(tmp_path) == 0  # nothing of the file was stored


def test_a_later_null_in_a_column_recorded_required_is_refused_naming_the_file_row_and_column(tmp_path):
    added(tmp_path, CURRENT)
    csv(tmp_path, "a.csv", "id,at,city\n1,2024-01-01T10:00:00Z,Oslo\n")
    coord("pull", NAME, cwd=tmp_path)
    csv(tmp_path, "b.csv", "id,at,city\n2,2024-01-02T10:00:00Z,Lima\n,2024-01-03T10:00:00Z,Pune\n")
    failed = coord("pull", NAME, cwd=tmp_path, check=False)
    (line,) = failed.stderr.strip().splitlines()
    assert "b.csv: row 2: column 'id' is null, but the dataset's schema records it as required" in line
    assert data_blocks(tmp_path) == 1


def test_a_column_the_dataset_records_optional_stays_optional_and_takes_nulls(tmp_path):
    added(tmp_path, OPTIONAL_ID)  # as a dataset an earlier coord recorded: id optional
    csv(tmp_path, "a.csv", "id,at,city\n1,2024-01-01T10:00:00Z,Oslo\n")
    coord("pull", NAME, cwd=tmp_path)
    coord_here("add", "--replace", str(manifest(tmp_path, CURRENT)), cwd=tmp_path)  # id Int64 now
    csv(tmp_path, "b.csv", "id,at,city\n,2024-01-02T10:00:00Z,Lima\n")
    assert "1 new record" in coord("pull", NAME, cwd=tmp_path).stdout
    assert nullable(tmp_path)["id"] is True
    assert data_blocks(tmp_path) == 2
