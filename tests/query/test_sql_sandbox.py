"""``coord sql``'s DuckDB in its sandbox: it reads the checked slices with its own Parquet reader
and the operating system keeps it from writing, from the network and from the parent's
environment, whatever DuckDB itself would allow.

The workspace is a current-ODF root pulled twice (two slices); answers are checked against
DuckDB reading the same files directly."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.query.sandboxed import Failure, SandboxedDuckDB, Setup, bwrap_command, slice_path
from coordinator.query.sql import SqlError, SqlSession, slice_files, split_script
from coordinator.workspace import Workspace
from tests.support.cli import coord

ORDERS = "org.example.orders"
MANIFEST = f"""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {ORDERS}
  source:
    kind: root
    fetch: {{kind: url, url: orders.parquet}}
    read: {{kind: parquet, schema: ["order_id BIGINT", "city STRING", "amount BIGINT"]}}
    merge: {{kind: ledger, primaryKey: [order_id]}}
"""


def orders(first: int, n: int) -> pa.Table:
    ids = range(first, first + n)
    return pa.table({"order_id": list(ids), "city": [["Oslo", "Lima", "Pune"][i % 3] for i in ids],
                     "amount": [(i * 37) % 101 for i in ids]})


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sandboxed-sql")
    coord("init", cwd=folder)
    (folder / "orders.yaml").write_text(MANIFEST)
    coord("add", "orders.yaml", cwd=folder)
    for n in (300, 500):  # the second pull adds orders 300..499: a second slice
        pq.write_table(orders(0, n), folder / "orders.parquet")
        coord("pull", ORDERS, cwd=folder)
    return folder


def files_of(home) -> list[str]:
    return [str(f) for f in slice_files(Workspace.open(home))[ORDERS]]


def answer(session: SqlSession, text: str) -> pa.Table:
    return session.query(split_script(text)[0], text)


def test_a_group_by_equals_duckdb_reading_the_slices_itself(home):
    query = "SELECT city, count(*) AS n, sum(amount) AS total FROM {} GROUP BY city ORDER BY city"
    ours = json.loads(coord("sql", "-o", "json", "-c", query.format(f'"{ORDERS}"'), cwd=home).stdout)
    theirs = duckdb.sql(query.format(f"read_parquet({files_of(home)!r}, union_by_name = true)")).df()
    assert len(files_of(home)) == 2
    assert pd.DataFrame(ours).equals(theirs.astype({"n": "int64", "total": "int64"}))


def test_every_row_reads_as_duckdb_reads_the_slices_in_chain_order(home):
    with SqlSession(Workspace.open(home)) as session:
        ours = answer(session, f'SELECT * FROM "{ORDERS}"')
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        theirs = con.sql(f"SELECT * FROM read_parquet({files_of(home)!r}, union_by_name = true)")
        theirs = theirs.to_arrow_table()
    assert ours.num_rows == 500 and ours.equals(theirs)


def test_the_session_in_this_process_answers_as_the_sandboxed_one(home):
    query = f'SELECT city, max(order_id) AS m, avg(amount) AS a FROM "{ORDERS}" GROUP BY city ORDER BY 1'
    ws = Workspace.open(home)
    with SqlSession(ws) as sandboxed, SqlSession(ws, sandbox=False) as here:
        assert answer(sandboxed, query).equals(answer(here, query))


def test_an_interrupted_session_answers_the_next_query(home):
    with SqlSession(Workspace.open(home)) as session:
        schema, batches = session.batches(split_script("SELECT * FROM range(10000000)")[0],
                                          "SELECT * FROM range(10000000)")
        next(batches)
        session.interrupt()
        assert answer(session, f'SELECT count(*) AS n FROM "{ORDERS}"').to_pylist() == [{"n": 500}]


@pytest.mark.parametrize("query, why", [
    # DuckDB's allowed paths let it open a slice to write too: the sandbox refuses it
    ("COPY (SELECT 42) TO '{slice}' (FORMAT csv, USE_TMP_FILE false)", "Read-only file system"),
    ("COPY (SELECT 42) TO '{home}/out.csv' (FORMAT csv)", "Permission Error"),
    ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
    ("ATTACH '{home}/other.duckdb'", "Permission Error"),
])
def test_a_statement_that_got_past_the_check_reaches_nothing(home, query, why):
    """The statement check is the first wall; DuckDB's lockdown and the sandbox the others."""
    from coordinator.query.sql import Statement

    target = files_of(home)[0]
    before = open(target, "rb").read()
    text = query.format(slice=slice_path(0), home=home)
    with SqlSession(Workspace.open(home)) as session, pytest.raises(SqlError, match=why) as refused:
        session.query(Statement(text, "SELECT", 0), text)
    assert open(target, "rb").read() == before
    assert not (home / "other.duckdb").exists() and not (home / "out.csv").exists()
    assert str(home) not in str(refused.value)


@pytest.fixture
def unlocked(home):
    """A sandboxed DuckDB with none of DuckDB's own lockdown: only the sandbox stands."""
    db = SandboxedDuckDB(Setup({}, (), (), (), tuple(map(Path, files_of(home)))))
    yield db
    db.close()


def failure_of(db: SandboxedDuckDB, text: str) -> str:
    with pytest.raises(Failure) as failed:
        _, batches = db.reader(text)
        list(batches)
    return str(failed.value)


def test_the_sandbox_refuses_writing_a_slice_even_when_duckdb_would(home, unlocked):
    before = open(files_of(home)[0], "rb").read()
    error = failure_of(unlocked, f"COPY (SELECT 42) TO '{slice_path(0)}' (FORMAT csv, USE_TMP_FILE false)")
    assert "Read-only file system" in error
    assert open(files_of(home)[0], "rb").read() == before


@pytest.mark.parametrize("target", ["/out.csv", "/tmp/out.csv", "/dev/shm/out.csv"])
def test_the_sandbox_has_no_writable_place(unlocked, target):
    assert failure_of(unlocked, f"COPY (SELECT 42) TO '{target}' (FORMAT csv)")


def test_the_sandbox_holds_no_file_of_the_machine_but_the_slices(home, unlocked):
    def rows(text: str) -> list[dict]:
        schema, batches = unlocked.reader(text)
        return pa.Table.from_batches(list(batches), schema).to_pylist()

    for path in ("/etc/passwd", str(home / "orders.parquet"), f"{home}/.coord/**"):
        assert rows(f"SELECT filename FROM read_text('{path}')") == []
    assert rows(f"SELECT count(*) AS n FROM read_parquet('{slice_path(1)}')") == [{"n": 200}]


def sandboxed_python(home, code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``code`` run by Python in the sandbox a query runs in, instead of the query's worker."""
    command = bwrap_command([Path(f) for f in files_of(home)])
    program = command[:command.index("--") + 1] + [sys.executable, "-I", "-c", code]
    return subprocess.run(program, env=env, capture_output=True, text=True, check=True)


def test_the_sandbox_sees_no_variable_of_its_parent_s_environment(home):
    seen = sandboxed_python(home, "import os; print(sorted(os.environ))",
                            {"PATH": "/usr/bin:/bin", "COORD_SECRET": "s3cr3t"}).stdout
    assert "COORD_SECRET" not in seen and "PATH" not in seen


def test_the_sandbox_has_no_network(home):
    code = ("import socket\n"
            "print(sorted(n for _, n in socket.if_nameindex()))\n"
            "try:\n socket.create_connection(('1.1.1.1', 53), timeout=5)\n"
            "except OSError as e:\n print('unreachable', e.errno)")
    seen = sandboxed_python(home, code, {"PATH": "/usr/bin:/bin"}).stdout.splitlines()
    assert seen[0] == "['lo']" and seen[1].startswith("unreachable")


def test_a_query_over_more_slices_than_a_sandbox_binds_runs_in_this_process(home, monkeypatch):
    # bubblewrap's time grows with the square of its mounts: past the bound, the Arrow path
    from coordinator.query import sandboxed
    from coordinator.query.sql import InProcessDuckDB

    monkeypatch.setattr(sandboxed, "MAX_MOUNTS", 1)
    with SqlSession(Workspace.open(home)) as session:
        assert isinstance(session._db, InProcessDuckDB)
        assert answer(session, f'SELECT count(*) AS n FROM "{ORDERS}"').to_pylist() == [{"n": 500}]
