"""``coord compact``: a 0.39 root fed 200 small appends, its slices merged into one file with no
block changed. Every answer is computed apart from coord: by DuckDB over copies of the original
slice files taken before the compaction, and by hashing the files the blocks name.

The workspace is built once for the module (200 ``coord ingest`` runs in this process), and
compacted once; each test works on a copy. The killed compactions run as ``coord`` processes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.data.odf_slice import PARQUET_OPTIONS
from coordinator.store import layout
from coordinator.store.compact import CRASH_POINTS
from coordinator.store.compaction import load_index
from coordinator.store.dataset import CurrentDataset
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..serve.conftest import serving
from ..support.cli import MANIFESTS, ROOT, coord, coord_here
from ..support.engines import ENV

APPENDS = 200
ROWS = 5
EXAMPLE = ROOT / "examples" / "compaction"
# one text of every stored column of every record, in offset order: equal texts, equal tables
DIGEST = ("SELECT count(*) AS n, sum(k) AS s, md5(string_agg(concat_ws('|', \"offset\", op, "
          "system_time, t, k, v), ',' ORDER BY \"offset\")) AS h FROM {table}")


def ingest(home: Path, first: int, count: int) -> None:
    for i in range(first, first + count):
        f = home / "in" / f"{i:04}.csv"
        f.write_text("t,k,v\n" + "".join(f"2026-01-01T{i // 60:02}:{i % 60:02}:{j:02}Z,{i * ROWS + j},"
                                         f"v{i}-{j}\n" for j in range(ROWS)))
        coord_here("ingest", "ev", str(f), cwd=home)


@pytest.fixture(scope="module")
def appended(tmp_path_factory) -> Path:
    """A workspace whose root ``ev`` holds 200 appends of 5 records (and a derivative ``even``
    over it, not pulled), with a copy of every original slice file in ``originals/``."""
    home = tmp_path_factory.mktemp("appended")
    coord_here("init", "--odf", "0.39", ".", cwd=home)
    (home / "in").mkdir()
    coord_here("add", str(EXAMPLE / "ev.yaml"), str(EXAMPLE / "even.yaml"), cwd=home)
    ingest(home, 0, APPENDS)
    shutil.copytree(dataset(home).root / layout.DATA, home / "originals")
    return home


@pytest.fixture(scope="module")
def compacted_once(appended, tmp_path_factory) -> Path:
    home = copy_of(appended, tmp_path_factory.mktemp("compacted") / "ws")
    coord_here("compact", "ev", cwd=home)
    return home


@pytest.fixture
def fresh(appended, tmp_path) -> Path:
    return copy_of(appended, tmp_path / "fresh")


@pytest.fixture
def compacted(compacted_once, tmp_path) -> Path:
    return copy_of(compacted_once, tmp_path / "compacted")


def copy_of(home: Path, to: Path) -> Path:
    shutil.copytree(home, to)
    return to


def dataset(home: Path, name: str = "ev") -> CurrentDataset:
    return CurrentDataset(Workspace.open(home), name)


def original_files(home: Path) -> list[str]:
    """The copies of the original slices, in chain order."""
    return [str(home / "originals" / str(r.slice.physical_hash)) for r in dataset(home).state().slices]


def duckdb_answer(query: str, files: list[str]) -> list[dict]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE VIEW ev AS SELECT * FROM read_parquet({files!r})")
    table = con.sql(query).arrow()
    return (table.read_all() if isinstance(table, pa.RecordBatchReader) else table).to_pylist()


def sql(home: Path, query: str, *args: str) -> list[dict]:
    return json.loads(coord_here("sql", "-c", query, "-o", "json", *args, cwd=home).stdout)


# --- what readers answer ----------------------------------------------------------------------


def test_compacting_merges_every_slice_into_one_file_and_removes_the_originals(compacted):
    index = load_index(dataset(compacted).root)
    assert [len(f.slices) for f in index.files] == [APPENDS]
    assert list((dataset(compacted).root / layout.DATA).iterdir()) == []


def test_compact_says_how_many_slices_it_merged_and_the_bytes_before_and_after(fresh):
    out = coord_here("compact", "ev", cwd=fresh).stdout
    root = dataset(fresh).root
    before = sum(r.slice.size for r in dataset(fresh).state().slices)
    after = (root / layout.compacted_file(load_index(root).files[0].name)).stat().st_size
    assert out == (f"ev: 200 slices merged into 1 file ({before / 1e3:,.1f} kB -> {after / 1e3:,.1f} kB), "
                   "200 originals removed\n")


def test_compacting_changes_no_block(appended, compacted):
    before, after = dataset(appended).state(), dataset(compacted).state()
    assert [b.hash for b in after.blocks] == [b.hash for b in before.blocks]


def test_sql_gives_the_answer_duckdb_gives_over_the_original_files(compacted):
    answer = sql(compacted, DIGEST.format(table="ev"))
    assert answer[0]["n"] == APPENDS * ROWS
    assert answer == duckdb_answer(DIGEST.format(table="ev"), original_files(compacted))


def test_sql_as_at_a_block_inside_the_compacted_file_reads_only_the_slices_up_to_it(compacted):
    state = dataset(compacted).state()
    at = state.slices[99]
    answer = sql(compacted, DIGEST.format(table="ev"), "--as-at", str(at.block_hash))
    assert answer == duckdb_answer(DIGEST.format(table="ev"), original_files(compacted)[:100])


def test_tail_gives_the_last_records_of_the_original_files(compacted):
    tail = json.loads(coord_here("tail", "ev", "-n", "7", "-o", "json", cwd=compacted).stdout)
    expected = duckdb_answer("SELECT \"offset\", k, v FROM ev ORDER BY \"offset\" DESC LIMIT 7",
                             original_files(compacted))[::-1]
    assert [{c: r[c] for c in ("offset", "k", "v")} for r in tail] == expected


def test_verify_passes_and_says_the_original_bytes_are_checked_only_by_deep(compacted):
    report = json.loads(coord_here("verify", "ev", "-o", "json", cwd=compacted).stdout)[0]
    assert report["ok"]
    assert "200 originals are not kept" in report["compaction"]
    assert "verify --deep" in report["compaction"]


def test_verify_deep_rebuilds_every_slice_and_checks_its_blocks_hashes(compacted):
    report = json.loads(coord_here("verify", "ev", "--deep", "-o", "json", cwd=compacted).stdout)[0]
    assert report["ok"]
    assert "200 slices are read from 1 compacted file: each one's rows checked" in report["compaction"]


def test_verify_deep_names_the_slice_whose_rows_changed_in_the_compacted_file(compacted):
    ds = dataset(compacted)
    file = load_index(ds.root).files[0]
    path = ds.root / layout.compacted_file(file.name)
    table = pq.read_table(path)
    changed = 137 * ROWS + 2  # a record of the 138th slice
    k = table["k"].to_numpy().copy()
    k[changed] += 1
    pq.write_table(table.set_column(table.schema.get_field_index("k"), table.schema.field("k"), pa.array(k)),
                   path, **{**PARQUET_OPTIONS, "row_group_size": 122_880})
    proc = coord_here("verify", "ev", "--deep", cwd=compacted, check=False)
    assert proc.returncode == 1
    slice_of = ds.state().slices[137]
    problems = [line for line in proc.stdout.splitlines() if "problem:" in line]
    named = [p for p in problems if str(slice_of.slice.physical_hash) in p]
    assert len(named) == 1 and f"block {slice_of.sequence_number} " in named[0]
    assert "its rows rebuild to bytes hashing to" in named[0]
    # no other slice is blamed: only that one, and the file's own bytes
    assert len(problems) == 2
    assert any(str(file.name) in p and "not the file its compaction wrote" in p for p in problems)


def test_verify_names_a_changed_compacted_file_and_sql_refuses_to_read_it(compacted):
    ds = dataset(compacted)
    file = load_index(ds.root).files[0]
    path = ds.root / layout.compacted_file(file.name)
    data = bytearray(path.read_bytes())
    data[200] ^= 1
    path.write_bytes(bytes(data))
    proc = coord_here("verify", "ev", cwd=compacted, check=False)
    assert proc.returncode == 1
    assert f"{layout.compacted_file(file.name)} (the compacted rows of blocks" in proc.stdout
    refused = coord_here("sql", "-c", "SELECT count(*) FROM ev", cwd=compacted, check=False)
    assert refused.returncode == 1 and str(file.name) in refused.stderr


def test_an_ingest_after_compaction_appends_after_the_compacted_slices(compacted):
    ingest(compacted, APPENDS, 1)
    assert sql(compacted, "SELECT count(*) AS n, max(\"offset\") AS last FROM ev") == [
        {"n": (APPENDS + 1) * ROWS, "last": (APPENDS + 1) * ROWS - 1}]
    assert verify_folder(dataset(compacted).root) == []


def test_the_api_answers_sql_as_duckdb_over_the_original_files_and_serves_their_bytes(
        compacted, tmp_path):
    with serving(compacted, env={ENV: "fake"}) as served:
        answer = served.get("/api/sql", params={"q": DIGEST.format(table="ev")}).json()["rows"]
        assert answer == duckdb_answer(DIGEST.format(table="ev"), original_files(compacted))
        other = tmp_path / "other"
        other.mkdir()
        coord_here("init", "--odf", "0.39", ".", cwd=other)
        coord_here("pull", f"{served.url}/ev", cwd=other)
    assert verify_folder(dataset(other).root) == []
    assert sorted(p.name for p in (dataset(other).root / layout.DATA).iterdir()) == sorted(
        Path(f).name for f in original_files(compacted))


# --- incremental ------------------------------------------------------------------------------


def test_a_second_compaction_merges_only_the_slices_added_since(compacted):
    first = load_index(dataset(compacted).root).files[0]
    ingest(compacted, APPENDS, 3)
    out = coord_here("compact", "ev", "-o", "json", cwd=compacted).stdout
    assert json.loads(out)["slices"] == 3 and json.loads(out)["files"] == 1
    files = load_index(dataset(compacted).root).files
    assert files[0] == first and len(files[1].slices) == 3
    assert files[1].slices[0].start == APPENDS * ROWS
    assert sql(compacted, "SELECT count(*) AS n FROM ev") == [{"n": (APPENDS + 3) * ROWS}]


def test_keeping_the_originals_leaves_them_and_verify_checks_them_too(fresh):
    coord_here("compact", "ev", "--keep-originals", cwd=fresh)
    root = dataset(fresh).root
    assert sorted(p.name for p in (root / layout.DATA).iterdir()) == sorted(
        Path(f).name for f in original_files(fresh))
    report = json.loads(coord_here("verify", "ev", "-o", "json", cwd=fresh).stdout)[0]
    assert report["ok"] and "200 of their originals are kept and were checked too" in report["compaction"]


def test_a_compaction_empties_the_cache_of_slices_rebuilt_for_readers(compacted):
    coord_here("tail", "ev", "-n", "3", cwd=compacted)
    rebuilt = dataset(compacted).root / layout.REBUILT
    newest = dataset(compacted).state().slices[-1].slice.physical_hash
    assert [p.name for p in rebuilt.iterdir()] == [str(newest)]
    coord_here("compact", "ev", cwd=compacted)
    assert not rebuilt.exists()


def test_a_compaction_with_nothing_new_says_so(compacted):
    assert coord_here("compact", "ev", cwd=compacted).stdout == "ev: nothing to compact\n"


# --- sharing ---------------------------------------------------------------------------------


def test_a_push_after_compaction_sends_the_original_bytes_and_a_fresh_workspace_pulls_them(
        compacted, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    coord_here("push", "ev", "--to", f"file://{repo}/ev", cwd=compacted)
    assert verify_folder(repo / "ev") == []
    pushed = sorted(p.name for p in (repo / "ev" / layout.DATA).iterdir())
    assert pushed == sorted(Path(f).name for f in original_files(compacted))
    other = tmp_path / "other"
    other.mkdir()
    coord_here("init", "--odf", "0.39", ".", cwd=other)
    coord_here("pull", f"file://{repo}/ev", cwd=other)
    assert sql(other, DIGEST.format(table="ev")) == duckdb_answer(DIGEST.format(table="ev"),
                                                                  original_files(compacted))


def test_a_push_refuses_a_compacted_slice_whose_original_cannot_be_rebuilt(compacted, tmp_path):
    ds = dataset(compacted)
    index_path = ds.root / layout.COMPACTION_INDEX
    doc = json.loads(index_path.read_bytes())
    doc["files"][0]["slices"][4]["rebuilds"] = False  # as for bytes another writer made
    index_path.write_text(json.dumps(doc))
    (tmp_path / "repo").mkdir()
    proc = coord_here("push", "ev", "--to", f"file://{tmp_path}/repo/ev", cwd=compacted, check=False)
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    physical = ds.state().slices[4].slice.physical_hash
    assert f"dataset ev: data/{physical} was compacted" in line and "pull the dataset again" in line


# --- downstream ------------------------------------------------------------------------------


def test_a_derivative_pulled_after_its_input_was_compacted_holds_what_it_holds_uncompacted(fresh, compacted):
    coord_here("pull", "even", cwd=fresh, fake_engine=True)
    coord_here("pull", "even", cwd=compacted, fake_engine=True)
    query = ("SELECT count(*) AS n, sum(k) AS s, md5(string_agg(concat_ws('|', t, k, v), ',' "
             "ORDER BY \"offset\")) AS h FROM even")
    assert sql(compacted, query) == sql(fresh, query)
    assert sql(compacted, "SELECT count(*) AS n FROM even") == [{"n": APPENDS * ROWS // 2}]


def test_a_derivative_pulled_before_the_compaction_is_left_as_it_was(fresh):
    coord_here("pull", "even", cwd=fresh, fake_engine=True)
    before = dataset(fresh, "even").state()
    files = sorted(p.name for p in (dataset(fresh, "even").root / layout.DATA).iterdir())
    coord_here("compact", "ev", cwd=fresh)
    assert dataset(fresh, "even").state() == before
    assert sorted(p.name for p in (dataset(fresh, "even").root / layout.DATA).iterdir()) == files
    assert coord_here("pull", "even", cwd=fresh, fake_engine=True).returncode == 0
    assert dataset(fresh, "even").state().head == before.head


# --- killed ----------------------------------------------------------------------------------


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_compaction_killed_at_any_step_leaves_a_dataset_that_verifies_and_the_next_finishes(fresh, point):
    killed = coord("compact", "ev", cwd=fresh, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9, killed.stderr
    assert verify_folder(dataset(fresh).root) == []
    digest = DIGEST.format(table="ev")
    assert sql(fresh, digest) == duckdb_answer(digest, original_files(fresh))
    coord("compact", "ev", cwd=fresh)
    root = dataset(fresh).root
    index = load_index(root)
    assert [len(f.slices) for f in index.files] == [APPENDS]
    assert sorted(p.name for p in (root / layout.COMPACTED).iterdir()) == sorted(
        [str(index.files[0].name), "index.json"])
    assert list((root / layout.DATA).iterdir()) == []
    assert json.loads(coord_here("verify", "ev", "--deep", "-o", "json", cwd=fresh).stdout)[0]["ok"]
    assert coord_here("compact", "ev", cwd=fresh).stdout == "ev: nothing to compact\n"


# --- refused ---------------------------------------------------------------------------------


def test_a_dataset_of_odf_018_is_refused_in_one_line(tmp_path):
    coord_here("init", "--odf", "0.18", ".", cwd=tmp_path)
    coord_here("add", str(MANIFESTS / "com.example.orders.yaml"), cwd=tmp_path)
    proc = coord_here("compact", "com.example.orders", cwd=tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stderr == ("coord: error: com.example.orders is stored in ODF 0.18, which coord "
                           "compact does not merge; coord upgrade com.example.orders makes a 0.39 "
                           "copy that it does\n")


def test_the_target_size_is_a_checked_setting(tmp_path):
    coord_here("init", "--odf", "0.39", ".", cwd=tmp_path)
    coord_here("config", "set", "compaction.targetBytes", "16MiB", cwd=tmp_path)
    assert Workspace.open(tmp_path).config().compaction.target_bytes == 16 << 20
    proc = coord_here("config", "set", "compaction.targetBytes", "12", cwd=tmp_path, check=False)
    assert proc.returncode == 1 and "compaction.targetBytes" in proc.stderr
