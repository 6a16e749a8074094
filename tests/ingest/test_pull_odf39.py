"""``coord add`` and ``coord pull`` of a root in a workspace whose new datasets are ODF 0.39
(``store.define``, ``ingest.current``): the chain is Seed, the definition, then per pull a
SetDataSchema where the schema is new and an AddData of a slice built as the reference builds
it. Every answer here is computed apart from the ingest path: the records by pyarrow's CSV
reader, the folder by ``store.verify.verify_folder`` (which rehashes every file), the events
of a reference-form manifest by its own loader.

The commands run in the test process (``coord_here``) but for the killed ones and one whole
path from the command line, which run as ``coord`` processes.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from coordinator.metadata.manifest import parse_manifest
from coordinator.metadata.odf39 import events as e
from coordinator.store.append import CRASH_POINTS
from coordinator.store.dataset import CurrentDataset
from coordinator.store.read import read_state
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import MANIFESTS, coord, coord_here

NAME = "test.cities"
REFERENCE = MANIFESTS / "reference"


def manifest(home: Path, name: str = NAME, merge: str = "{kind: append}",
             schema: str = ', schema: ["id BIGINT", "at TIMESTAMP", "city STRING"]') -> Path:
    path = home / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: 1
        kind: DatasetSnapshot
        content:
          id: {name}
          source:
            kind: root
            fetch: {{kind: filesGlob, path: "in/*.csv"}}
            read: {{kind: csv, header: true{schema}}}
            merge: {merge}
          vocab: {{eventTimeColumn: at}}
        """))
    return path


def csv(home: Path, name: str, rows: list[tuple], header: str = "id,at,city") -> Path:
    path = home / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


@pytest.fixture
def home(tmp_path) -> Path:
    coord_here("init", "--odf", "0.39", ".", cwd=tmp_path)
    return tmp_path


def added(home: Path, path: Path | None = None) -> CurrentDataset:
    coord_here("add", str(path or manifest(home)), cwd=home)
    return CurrentDataset(Workspace.open(home), NAME)


def kinds(ds: CurrentDataset) -> list[str]:
    return [type(b.block.event).__name__ for b in ds.state().blocks]


def stored(ds: CurrentDataset) -> pa.Table:
    """Every slice of the chain, in chain order, as pyarrow reads the files."""
    tables = [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]
    return pa.concat_tables(tables, promote_options="permissive")


def expected(*paths: Path) -> list[dict]:
    """The CSV files' records as pyarrow reads them, by id."""
    rows = [r for p in paths for r in pacsv.read_csv(p).to_pylist()]
    return sorted(rows, key=lambda r: r["id"])


def records(ds: CurrentDataset, columns=("id", "at", "city")) -> list[dict]:
    return sorted(stored(ds).select(list(columns)).to_pylist(), key=lambda r: r["id"])


def ids(*tables: pa.Table) -> list[int]:
    """The tables' ids, sorted: the records of a large pull, compared without a dict a record."""
    return sorted(i for t in tables for i in t["id"].to_pylist())


FIRST = [(1, "2024-01-01T10:00:00Z", "Oslo"), (2, "2024-01-02T10:00:00Z", "Lima")]
SECOND = [(3, "2024-01-03T10:00:00Z", "Pune"), (4, "2024-01-04T10:00:00Z", "Kyiv")]


# --- add --------------------------------------------------------------------------------------


def test_add_starts_a_0_39_chain_seed_named_by_a_fresh_key_then_its_source(home):
    ds = added(home)
    state = ds.state()
    assert kinds(ds) == ["Seed", "SetPollingSource", "SetVocab"]
    assert str(state.id).startswith("did:odf:") and ds.alias() == NAME
    assert state.vocab.event_time_column == "at"
    assert not (ds.root / "meta").exists()  # the reference's layout, not 0.18's
    assert verify_folder(ds.root) == []


def test_a_reference_form_manifest_adds_its_events_as_written(home):
    path = REFERENCE / "covid" / "alberta.case-details.yaml"
    out = coord_here("add", str(path), cwd=home)
    assert "left out" not in out.stderr + out.stdout  # a 0.39 dataset keeps SetInfo & co
    ds = CurrentDataset(Workspace.open(home), "covid19.alberta.case-details")
    written = parse_manifest(path.read_text(), str(path), adapt=False).content
    assert [b.block.event for b in ds.state().blocks[1:]] == written.metadata
    assert kinds(ds) == ["Seed", "SetPollingSource", "SetVocab", "SetInfo", "SetAttachments",
                         "SetLicense"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_add_killed_at_any_step_leaves_no_dataset_and_the_rerun_adds_it_whole(home, point):
    path = manifest(home)
    killed = coord("add", str(path), cwd=home, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9
    assert Workspace.open(home).odf_of(NAME) is None and not (home / ".coord/datasets" / NAME).exists()
    ds = added(home, path)
    assert kinds(ds) == ["Seed", "SetPollingSource", "SetVocab"] and verify_folder(ds.root) == []


def test_add_again_with_replace_appends_only_a_changed_source(home):
    ds = added(home)
    before = len(ds.state().blocks)
    assert "unchanged" in coord_here("add", "--replace", str(manifest(home)), cwd=home).stdout
    assert len(ds.state().blocks) == before
    changed = manifest(home, merge="{kind: ledger, primaryKey: [id]}")
    assert "updated" in coord_here("add", "--replace", str(changed), cwd=home).stdout
    assert kinds(ds)[before:] == ["SetPollingSource"]
    assert ds.state().polling_source.merge.primary_key == ["id"]


def test_a_derivative_names_its_inputs_by_did_aliased_by_name(home):
    ds = added(home)
    coord_here("add", str(derivative(home)), cwd=home)
    derived = CurrentDataset(Workspace.open(home), "test.large").state()
    assert derived.transform.inputs == [e.TransformInput(dataset_ref=str(ds.state().id), alias=NAME)]


def test_a_root_and_its_derivative_added_pulled_and_verified_from_the_cli(home):
    """The whole path of a 0.39 workspace: add both, pull both (the derivative through the
    test engine), verify with the replay; the derivative's records are the root's filtered.
    Each command a ``coord`` process."""
    coord("add", str(manifest(home)), cwd=home)
    coord("add", str(derivative(home)), cwd=home)
    csv(home, "a.csv", FIRST)
    coord("pull", "-r", "test.large", cwd=home, fake_engine=True)
    csv(home, "b.csv", SECOND)
    coord("pull", "-r", "test.large", cwd=home, fake_engine=True)
    ds, large = (CurrentDataset(Workspace.open(home), name) for name in (NAME, "test.large"))
    want = [r for r in expected(home / "in" / "a.csv", home / "in" / "b.csv") if r["id"] % 2 == 0]
    assert records(large) == want and len(records(ds)) == 4
    assert [type(b.block.event).__name__ for b in large.state().blocks].count("ExecuteTransform") == 2
    out = coord("verify", "test.large", cwd=home, fake_engine=True).stdout
    assert "integrity: ok" in out and "reproducibility: reproduced" in out


def derivative(home: Path, name: str = "test.large",
               query: str = f"SELECT * FROM `{NAME}` WHERE id % 2 = 0") -> Path:
    """A derivative's manifest over the root (its event time the root's, ``at``)."""
    path = home / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: 1
        kind: DatasetSnapshot
        content:
          id: {name}
          source:
            kind: derivative
            inputs: [{NAME}]
            transform: {{kind: sql, engine: spark, query: "{query}"}}
          vocab: {{eventTimeColumn: at}}
        """))
    return path


def test_a_0_39_derivative_of_a_0_18_dataset_is_refused_with_the_upgrade_to_run(tmp_path):
    coord_here("init", "--odf", "0.18", ".", cwd=tmp_path)
    coord_here("add", str(manifest(tmp_path)), cwd=tmp_path)  # a 0.18 root
    coord_here("config", "set", "odf", "0.39", cwd=tmp_path)
    refused = coord_here("add", str(derivative(tmp_path, "test.copy")), cwd=tmp_path, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: dataset test.copy: input {NAME} is an ODF 0.18 dataset, which an ODF 0.39 "
        f"derivative cannot read; upgrade it first (coord upgrade {NAME} --into FOLDER)")


def test_a_0_18_workspace_adds_and_pulls_0_18_datasets_as_before(tmp_path):
    coord_here("init", "--odf", "0.18", ".", cwd=tmp_path)
    csv(tmp_path, "a.csv", FIRST)
    coord_here("add", str(manifest(tmp_path)), cwd=tmp_path)
    coord_here("pull", NAME, cwd=tmp_path)
    ws = Workspace.open(tmp_path)
    assert ws.odf_of(NAME).value == "0.18"
    assert ws.dataset(NAME).state().num_records == 2
    assert not (ws.meta / "datasets" / NAME / "refs").exists()


# --- pull -------------------------------------------------------------------------------------


def test_pull_writes_a_verified_folder_holding_the_csv_records_from_offset_0(home):
    ds = added(home)
    files = [csv(home, "a.csv", FIRST)]
    assert "2 new records" in coord_here("pull", NAME, cwd=home).stdout
    assert kinds(ds)[3:] == ["SetDataSchema", "AddData"]
    assert verify_folder(ds.root) == []
    assert records(ds) == expected(*files)
    table = stored(ds)
    assert table.column_names[:4] == ["offset", "op", "system_time", "at"]
    assert table["offset"].to_pylist() == [0, 1] and set(table["op"].to_pylist()) == {0}
    state = ds.state()
    assert state.watermark == max(r["at"] for r in expected(*files))
    schema = [f.name for f in state.schema.schema.fields]
    assert schema == ["offset", "op", "system_time", "at", "id", "city"]


def test_offsets_carry_on_across_pulls_and_a_pull_with_nothing_new_adds_no_block(home):
    ds = added(home)
    files = [csv(home, "a.csv", FIRST)]
    coord_here("pull", NAME, cwd=home)
    files.append(csv(home, "b.csv", SECOND))
    coord_here("pull", NAME, cwd=home)
    state = ds.state()
    assert kinds(ds)[3:] == ["SetDataSchema", "AddData", "AddData"]  # the schema once
    assert [(r.slice.offset_interval.start, r.slice.offset_interval.end) for r in state.slices] \
        == [(0, 1), (2, 3)]
    assert state.blocks[-1].block.event.prev_offset == 1
    assert stored(ds)["offset"].to_pylist() == [0, 1, 2, 3]
    assert records(ds) == expected(*files)
    head = ds.head()
    assert "up to date" in coord_here("pull", NAME, cwd=home).stdout
    assert ds.head() == head
    assert verify_folder(ds.root) == []


def test_a_new_nullable_column_appends_a_new_data_schema_before_its_data(home):
    ds = added(home, manifest(home, schema=""))  # columns as the files have them
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    csv(home, "b.csv", [(r + ("warm",)) for r in SECOND], header="id,at,city,weather")
    coord_here("pull", NAME, cwd=home)
    assert kinds(ds)[3:] == ["SetDataSchema", "AddData", "SetDataSchema", "AddData"]
    fields = ds.state().schema.schema.fields
    assert [f.name for f in fields][-1] == "weather" and fields[-1].type.KIND == "Option"
    assert [r["weather"] for r in records(ds, ("id", "weather"))] == [None, None, "warm", "warm"]
    assert verify_folder(ds.root) == []


def test_a_dropped_column_is_refused_and_nothing_is_committed(home):
    ds = added(home, manifest(home, schema=""))
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    head = ds.head()
    csv(home, "b.csv", [(i, t) for i, t, _ in SECOND], header="id,at")
    refused = coord_here("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0
    assert "the new data in b.csv drops column 'city', String" in refused.stdout + refused.stderr
    assert ds.head() == head


def test_a_column_no_slice_can_store_is_refused_naming_its_file(home):
    path = home / "waits.yaml"
    path.write_text(manifest(home).read_text().replace('"in/*.csv"', '"in/*.parquet"')
                    .replace("{kind: csv, header: true, schema: [\"id BIGINT\", \"at TIMESTAMP\", "
                             "\"city STRING\"]}", "{kind: parquet}"))
    ds = added(home, path)
    (home / "in").mkdir()
    pq.write_table(pa.table({"id": [1], "at": pa.array([0], pa.timestamp("s", "UTC")),
                             "wait": pa.array([60], pa.duration("s"))}), home / "in" / "a.parquet")
    refused = coord_here("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0
    assert "a.parquet: column 'wait'" in refused.stdout + refused.stderr
    assert kinds(ds)[-1] != "AddData"


def test_a_ledger_adds_only_keys_it_has_not_seen_read_from_earlier_slices(home):
    ds = added(home, manifest(home, merge="{kind: ledger, primaryKey: [id]}"))
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    csv(home, "b.csv", [(2, "2024-01-02T10:00:00Z", "Lima again"), *SECOND])
    assert "2 new records" in coord_here("pull", NAME, cwd=home).stdout
    assert [r["id"] for r in records(ds)] == [1, 2, 3, 4]
    assert records(ds)[1]["city"] == "Lima"


def test_a_changed_slice_is_refused_before_a_ledger_reads_its_keys(home):
    ds = added(home, manifest(home, merge="{kind: ledger, primaryKey: [id]}"))
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    data = ds.data_file(ds.state().slices[0].slice)
    data.write_bytes(data.read_bytes()[:-1] + b"!")  # a flipped byte
    head = ds.head()
    csv(home, "b.csv", SECOND)
    refused = coord_here("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0
    assert f"{NAME}: failed: {data} is missing or not the slice its block records" in refused.stdout
    assert ds.head() == head


def test_set_watermark_appends_an_add_data_with_only_the_watermark(home):
    ds = added(home)
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    coord_here("pull", NAME, "--set-watermark", "2030-01-01T00:00:00Z", cwd=home)
    event = ds.state().blocks[-1].block.event
    assert isinstance(event, e.AddData) and event.new_data is None and event.prev_offset == 1
    assert event.new_watermark.isoformat() == "2030-01-01T00:00:00+00:00"
    assert verify_folder(ds.root) == []


def test_each_block_keeps_its_fetch_state_in_the_cache_named_by_the_block(home):
    ds = added(home)
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    head = ds.state().blocks[-1]
    assert {p.name for p in ds.state_dir.iterdir()} == {f"{head.hash}.json"}
    assert '"last_file": "a.csv"' in ds.state_path(head.hash).read_text()


# --- bounded memory and crashes ---------------------------------------------------------------


def many(home: Path, name: str, n: int, start: int = 0) -> Path:
    return csv(home, name, [(i, f"2024-01-{1 + i % 28:02d}T00:00:00Z", f"city {i} {'x' * (i % 13)}")
                            for i in range(start, start + n)])


def test_a_pull_past_max_slice_bytes_commits_several_add_data_each_record_once(home):
    ds = added(home)
    coord_here("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=home)
    files = [many(home, "a.csv", 50_000), many(home, "b.csv", 50_000, start=50_000)]
    coord_here("pull", NAME, cwd=home)
    state = ds.state()
    assert len(state.slices) >= 3
    assert stored(ds)["offset"].to_pylist() == list(range(100_000))
    assert ids(stored(ds)) == ids(*(pacsv.read_csv(f) for f in files))
    assert verify_folder(ds.root) == []


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_pull_killed_at_any_step_leaves_the_old_head_and_the_next_pull_adds_each_record_once(home, point):
    ds = added(home)
    files = [csv(home, "a.csv", FIRST)]
    coord_here("pull", NAME, cwd=home)
    files.append(csv(home, "b.csv", SECOND))
    before = ds.head()

    killed = coord("pull", NAME, cwd=home, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9
    assert (ds.head() == before) == (point != "odf-head-updated")
    assert verify_folder(ds.root) == []

    coord_here("pull", NAME, cwd=home)
    state = ds.state()
    assert stored(ds)["offset"].to_pylist() == [0, 1, 2, 3]
    assert records(ds) == expected(*files)
    named = {f"{b.hash}.json" for b in state.blocks if isinstance(b.block.event, e.AddData)}
    assert {p.name for p in ds.state_dir.iterdir()} == named  # no state of a lost block
    assert verify_folder(ds.root) == [] and {p.name for p in (ds.root / "data").iterdir()} == {
        str(r.slice.physical_hash) for r in state.slices}


def test_a_pull_of_several_blocks_killed_after_one_resumes_within_the_file_exactly_once(home):
    ds = added(home)
    files = [csv(home, "a.csv", FIRST)]
    coord_here("pull", NAME, cwd=home)  # the schema is in: the next head to move is an AddData's
    coord_here("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=home)
    files.append(many(home, "b.csv", 100_000, start=10))
    killed = coord("pull", NAME, cwd=home, env={"COORD_CRASH_AT": "odf-head-updated"}, check=False)
    assert killed.returncode == -9
    first = read_state(ds.root)
    assert len(first.slices) == 2 and 1 < first.slices[-1].slice.offset_interval.end < 100_001
    coord_here("pull", NAME, cwd=home)
    assert len(ds.state().slices) > 3
    assert stored(ds)["offset"].to_pylist() == list(range(100_002))
    assert ids(stored(ds)) == ids(*(pacsv.read_csv(f) for f in files))
    assert verify_folder(ds.root) == []


def test_a_slice_refused_while_the_next_is_read_keeps_the_blocks_before_and_a_rerun_adds_the_rest(home):
    ds = added(home, manifest(home, schema=""))
    coord_here("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=home)
    files = [many(home, "a.csv", 100_000)]
    late = csv(home, "b.csv", [(*r, 0) for r in SECOND], header="id,at,city,offset")
    refused = coord_here("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0
    said = refused.stdout + refused.stderr
    assert "b.csv: column 'offset' is a system column" in said
    assert 2 <= len(ds.state().slices) and verify_folder(ds.root) == []
    assert ids(stored(ds)) == list(range(len(stored(ds))))  # the blocks before, whole

    files.append(csv(home, "b.csv", SECOND))
    assert late == files[-1]
    coord_here("pull", NAME, cwd=home)
    assert stored(ds)["offset"].to_pylist() == list(range(100_002))
    assert ids(stored(ds)) == ids(*(pacsv.read_csv(f) for f in files))
    assert verify_folder(ds.root) == []


def test_a_file_unreadable_while_a_slice_commits_keeps_that_slice_and_a_rerun_adds_the_rest(home):
    ds = added(home)
    coord_here("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=home)
    files = [many(home, "a.csv", 100_000)]
    csv(home, "b.csv", [("x", "2024-01-03T10:00:00Z", "Pune")])
    refused = coord_here("pull", NAME, cwd=home, check=False)
    assert refused.returncode != 0 and "b.csv" in refused.stdout + refused.stderr
    kept = stored(ds)
    assert len(ds.state().slices) >= 2 and verify_folder(ds.root) == []
    assert kept["offset"].to_pylist() == list(range(len(kept)))
    assert ids(kept) == list(range(len(kept)))  # whole slices of a.csv, in file order

    files.append(csv(home, "b.csv", SECOND))
    coord_here("pull", NAME, cwd=home)
    assert stored(ds)["offset"].to_pylist() == list(range(100_002))
    assert ids(stored(ds)) == ids(*(pacsv.read_csv(f) for f in files))
    assert verify_folder(ds.root) == []


def test_a_url_sources_etag_is_the_add_datas_source_state_and_an_unchanged_url_adds_nothing(home, site):
    body = "id,at,city\n" + "".join(",".join(map(str, r)) + "\n" for r in FIRST)
    url = site.put("/cities.csv", body.encode(), etag='"v1"')
    path = manifest(home, merge="{kind: ledger, primaryKey: [id]}")
    path.write_text(path.read_text().replace('{kind: filesGlob, path: "in/*.csv"}',
                                             f'{{kind: url, url: "{url}"}}'))
    ds = added(home, path)
    coord_here("pull", NAME, cwd=home)
    event = ds.state().blocks[-1].block.event
    assert event.new_source_state == e.SourceState(source_name="default", kind="odf/etag",
                                                   value='"v1"')
    head = ds.head()
    assert "up to date" in coord_here("pull", NAME, cwd=home).stdout  # a 304: nothing new
    assert ds.head() == head
    site.put("/cities.csv", (body + "3,2024-01-03T10:00:00Z,Pune\n").encode(), etag='"v2"')
    assert "1 new record" in coord_here("pull", NAME, cwd=home).stdout
    assert ds.state().source_state.value == '"v2"' and [r["id"] for r in records(ds)] == [1, 2, 3]


def test_a_0_18_derivative_of_a_0_39_dataset_is_refused(home):
    added(home)
    coord_here("config", "set", "odf", "0.18", cwd=home)
    refused = coord_here("add", str(derivative(home, "test.copy")), cwd=home, check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1] == (
        f"coord: error: dataset test.copy: input {NAME} is an ODF 0.39 dataset, which an ODF "
        "0.18 derivative cannot read; add it as a 0.39 dataset (coord config set odf 0.39, then "
        "coord add)")


def test_a_preprocess_query_runs_in_the_commands_engine_before_the_slice_is_built(home):
    path = manifest(home)
    path.write_text(path.read_text().replace(
        "    merge:", "    preprocess: {kind: sql, engine: spark, "
                     "query: 'SELECT *, upper(city) AS loud FROM input'}\n    merge:"))
    ds = added(home, path)
    files = [csv(home, "a.csv", FIRST)]
    coord_here("pull", NAME, cwd=home, fake_engine=True)
    assert [r["loud"] for r in records(ds, ("id", "loud"))] == [
        r["city"].upper() for r in expected(*files)]
    assert verify_folder(ds.root) == []


def test_a_0_39_ledger_roots_state_is_one_row_per_key_in_sql_and_tail(home):
    added(home, manifest(home, merge="{kind: ledger, primaryKey: [city]}"))
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    csv(home, "b.csv", [(5, "2024-01-05T10:00:00Z", "Oslo"), (6, "2024-01-06T10:00:00Z", "Pune")])
    coord_here("pull", NAME, cwd=home)  # a ledger keeps the first record of a key: Oslo 5 is not added
    rows = coord_here("sql", "-o", "json", "-c", f'SELECT city, id FROM "{NAME}@state" ORDER BY city',
                 cwd=home).stdout
    assert [(r["city"], r["id"]) for r in json.loads(rows)] == [("Lima", 2), ("Oslo", 1), ("Pune", 6)]
    tail = json.loads(coord_here("tail", "--state", "-o", "json", NAME, cwd=home).stdout)
    assert sorted((r["city"], r["id"]) for r in tail) == [("Lima", 2), ("Oslo", 1), ("Pune", 6)]
    first = CurrentDataset(Workspace.open(home), NAME).state().slices[0].block_hash
    as_at = json.loads(coord_here("tail", "--state", "-o", "json", "--as-at", first.digest.hex()[:12], NAME,
                             cwd=home).stdout)
    assert sorted((r["city"], r["id"]) for r in as_at) == [("Lima", 2), ("Oslo", 1)]


def test_a_0_39_append_root_has_no_state_and_says_why(home):
    added(home)
    csv(home, "a.csv", FIRST)
    coord_here("pull", NAME, cwd=home)
    refused = coord_here("tail", "--state", NAME, cwd=home, check=False)
    assert "its merge strategy is append, so it has no primary key" in refused.stderr
