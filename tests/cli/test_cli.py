"""The coord command, end to end, as a user runs it."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
from decimal import ROUND_HALF_UP, Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.metadata.yaml_codec import dump_yaml, manifest_to_dict
from coordinator.workspace import Workspace
from coordinator.workspace.commit import CRASH_POINTS
from coordinator.workspace.lock import DatasetLock
from tests.metadata.test_block_codec import (
    CONFORMANCE_HASH,
    DERIVATIVE_NANOS_HASH,
    NOON_NANOS,
    conformance_block,
)
from tests.support.cli import MANIFESTS, ROOT, coord, coord_command, coord_env

ORDERS = "com.example.orders"


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    return tmp_path


def test_version_names_the_release_and_the_metadata_format(tmp_path):
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = coord("--version", cwd=tmp_path).stdout
    assert out == f"coord {version} (Open Data Fabric 0.18 and 0.39)\n"


def write_orders(path, event_time_column="placed_at"):
    doc = yaml.safe_load((MANIFESTS / f"{ORDERS}.yaml").read_text())
    doc["content"]["vocab"]["eventTimeColumn"] = event_time_column
    path.write_text(yaml.safe_dump(doc))
    return path


def test_init_then_add_then_list(home):
    out = coord("add", str(MANIFESTS), cwd=home).stdout
    assert "added" in out and ORDERS in out
    listing = coord("list", cwd=home).stdout
    assert "com.example.orders.daily" in listing and "derivative" in listing


def test_add_refuses_an_existing_dataset_without_replace(home):
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    proc = coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home, check=False)
    assert proc.returncode != 0
    assert "already exists" in proc.stderr and "--replace" in proc.stderr


def test_a_bad_manifest_names_file_and_path_and_writes_nothing(home):
    bad = home / "bad.yaml"
    doc = yaml.safe_load((MANIFESTS / f"{ORDERS}.yaml").read_text())
    doc["content"]["source"]["merge"]["primaryKey"] = "order_id"
    bad.write_text(yaml.safe_dump(doc))
    good = MANIFESTS / "ca.bccdc.covid19.case-details.yaml"
    proc = coord("add", str(good), str(bad), cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, "one line, no traceback"
    assert "bad.yaml" in proc.stderr and "content.source.merge.primaryKey" in proc.stderr
    assert not Workspace.open(home).datasets()


def _hostile(text: str) -> dict[str, tuple[str, str]]:
    """Manifests made to exhaust the loader, from a good one: (text, what the error says)."""
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
    first_kind = text.splitlines().index("kind: DatasetSnapshot") + 1
    return {
        "alias bomb": (text + bomb, "values (an alias counts as the values it stands for)"),
        "oversized": (text + "#" * (8 << 20), "larger than 4194304 bytes (4 MiB)"),
        "deeply nested": (text + "x: " + "[" * 100_000, "nested more than 50 levels deep"),
        "duplicate key": (text + "kind: DatasetSnapshot\n",
                          f"duplicate key 'kind' (first on line {first_kind})"),
        "over-long id": (text.replace(f"id: {ORDERS}", "id: " + "a" * 5000),
                         "content.id: dataset id longer than 200 characters (5,000)"),
    }


@pytest.mark.parametrize("case", ["alias bomb", "oversized", "deeply nested", "duplicate key",
                                  "over-long id"])
def test_a_hostile_manifest_is_refused_in_one_line_within_a_second(home, case):
    text, reason = _hostile((MANIFESTS / f"{ORDERS}.yaml").read_text())[case]
    (home / "hostile.yaml").write_text(text)
    started = time.monotonic()
    proc = coord("add", "hostile.yaml", cwd=home, check=False)
    took = time.monotonic() - started
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr[:500]
    assert proc.stderr.startswith("coord: error: hostile.yaml: ") and reason in proc.stderr, proc.stderr
    assert took < 1, f"took {took:.2f} s"
    assert not Workspace.open(home).datasets()


def test_an_over_long_dataset_id_argument_is_refused_naming_the_limit(home):
    proc = coord("log", "a" * 5000, cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("coord: error: dataset id longer than 200 characters (5,000): aaa")


def test_debug_shows_the_traceback(home):
    proc = coord("--debug", "log", "org.example.missing", cwd=home, check=False)
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_add_replace_appends_a_block_only_when_something_changed(home):
    manifest = write_orders(home / "orders.yaml")
    coord("add", str(manifest), cwd=home)
    assert "unchanged" in coord("add", "--replace", str(manifest), cwd=home).stdout
    write_orders(manifest, event_time_column="order_time")
    assert "updated" in coord("add", "--replace", str(manifest), cwd=home).stdout
    blocks = json.loads(coord("log", ORDERS, "-o", "json", cwd=home).stdout)
    vocabs = [b.get("vocab") for b in blocks]
    assert vocabs == [{"eventTimeColumn": "order_time"}, {"eventTimeColumn": "placed_at"}]


def test_log_renders_yaml_with_the_signature_status(home):
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    out = coord("log", ORDERS, cwd=home).stdout
    own = Workspace.open(home).public_key.hex()
    assert f"# signed by {own} (trusted: this workspace)\n" in out and "kind: MetadataBlock" in out


def test_a_second_writer_exits_with_busy(home):
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    with DatasetLock(home / ".coord" / "locks" / f"{ORDERS}.lock", ORDERS):
        proc = coord("add", "--replace", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home, check=False)
    assert proc.returncode != 0
    assert f"dataset {ORDERS} is busy" in proc.stderr


def test_delete_refuses_a_dataset_others_depend_on(home):
    coord("add", str(MANIFESTS), cwd=home)
    proc = coord("delete", "--yes", ORDERS, cwd=home, check=False)
    assert proc.returncode != 0 and "com.example.orders.daily" in proc.stderr
    coord("delete", "--yes", "com.example.orders.daily", cwd=home)
    coord("delete", "--yes", ORDERS, cwd=home)
    assert ORDERS not in coord("list", cwd=home).stdout


def test_add_refuses_an_unknown_column_type_naming_the_file_and_a_close_type(home):
    doc = yaml.safe_load((MANIFESTS / f"{ORDERS}.yaml").read_text())
    doc["content"]["source"]["read"]["schema"][1] = "customer STRNG"
    (home / "typo.yaml").write_text(yaml.safe_dump(doc))
    proc = coord("add", "typo.yaml", cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("coord: error: typo.yaml: content.source.read: schema: column 'customer': "
                                  "unknown type 'STRNG' (did you mean STRING? known: ")
    assert coord("list", cwd=home).stdout.count("\n") == 1  # the header: nothing was added


def test_add_refuses_a_block_manifest_in_one_line(home):
    block = home / "block.yaml"
    doc = manifest_to_dict(conformance_block())
    doc["content"]["blockHash"] = CONFORMANCE_HASH
    block.write_text(dump_yaml(doc))
    proc = coord("add", str(block), cwd=home, check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"coord: error: {block}: kind: coord add takes DatasetSnapshot manifests "
                           "(a MetadataBlock's hash: coord block hash FILE)\n")


def sql(**fields) -> dict:
    return {"transform": {"kind": "sql", "engine": "spark", **fields}}


@pytest.mark.parametrize("change, where, what", [
    ({"inputs": []}, "content.source.inputs", "a derivative needs at least one input"),
    (sql(query="SELECT 1", queries=[{"query": "SELECT 2"}]),
     "content.source.transform", "give query or queries, not both"),
    (sql(queries=[{"query": "SELECT 1"}, {"query": "SELECT 2"}]),
     "content.source.transform.queries", "only one query step may have no alias (the output)"),
    (sql(query="SELECT 1", temporalTables=[{"id": "com.example.other", "primaryKey": ["order_id"]}]),
     "content.source.transform.temporalTables[0].id", "com.example.other is not an input of this dataset"),
    (sql(query="SELECT 1", temporalTables=[{"name": ORDERS, "primaryKey": []}]),
     "content.source.transform.temporalTables[0].primaryKey", "give the columns that identify a row"),
])
def test_add_refuses_a_derivative_the_engine_would_refuse_without_starting_it(home, change, where, what):
    doc = yaml.safe_load((MANIFESTS / "com.example.orders.daily.yaml").read_text())
    doc["content"]["source"].update(change)
    (home / "daily.yaml").write_text(yaml.safe_dump(doc))
    proc = coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), "daily.yaml", cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.startswith(f"coord: error: daily.yaml: {where}: {what}")
    assert coord("list", cwd=home).stdout.count("\n") == 1  # nothing was added


def test_add_suggests_a_close_name_for_an_unknown_input(home):
    doc = yaml.safe_load((MANIFESTS / "com.example.orders.daily.yaml").read_text())
    doc["content"]["source"]["inputs"] = ["com.example.order"]
    (home / "daily.yaml").write_text(yaml.safe_dump(doc))
    proc = coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), "daily.yaml", cwd=home, check=False)
    assert proc.stderr == ("coord: error: dataset com.example.orders.daily: input com.example.order does not "
                           "exist (did you mean com.example.orders?)\n")


def test_delete_without_a_terminal_needs_yes(home):
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    proc = coord("delete", ORDERS, cwd=home, check=False)
    assert proc.returncode == 2 and "give --yes to confirm" in proc.stderr
    assert ORDERS in coord("list", cwd=home).stdout


def test_delete_on_a_terminal_asks_and_keeps_the_dataset_on_no(home):
    import select

    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    primary, secondary = os.openpty()
    proc = subprocess.Popen(coord_command(["delete", ORDERS]), cwd=home, env=coord_env({"TERM": "dumb"}),
                            stdin=secondary, stdout=secondary, stderr=secondary, close_fds=True)
    os.close(secondary)
    seen = b""
    while b"[y/N]" not in seen:
        ready, _, _ = select.select([primary], [], [], 60)
        assert ready, seen
        seen += os.read(primary, 4096)
    assert f"Delete {ORDERS} and all its data?".encode() in seen
    os.write(primary, b"n\n")
    assert proc.wait(timeout=60) == 130
    os.close(primary)
    assert ORDERS in coord("list", cwd=home).stdout


def test_reset_moves_the_head_to_an_earlier_block(home):
    manifest = write_orders(home / "orders.yaml")
    coord("add", str(manifest), cwd=home)
    first = json.loads(coord("log", ORDERS, "-o", "json", cwd=home).stdout)[0]["blockHash"]
    write_orders(manifest, event_time_column="order_time")
    coord("add", "--replace", str(manifest), cwd=home)
    coord("reset", ORDERS, first[:10], cwd=home)
    blocks = json.loads(coord("log", ORDERS, "-o", "json", cwd=home).stdout)
    assert [b["blockHash"] for b in blocks] == [first]


def test_block_hash_prints_the_conformance_vector(tmp_path):
    manifest = tmp_path / "block.yaml"
    manifest.write_text(dump_yaml(manifest_to_dict(conformance_block())))
    assert coord("block", "hash", str(manifest), cwd=tmp_path).stdout.strip() == CONFORMANCE_HASH


def test_block_hash_of_a_nanosecond_block_given_as_yaml(tmp_path):
    """kamu-cli's nanosecond block in its YAML form (its blockHash, from its earlier encoding,
    is ignored): the hash is this era's encoding of the same block."""
    manifest = tmp_path / "block.yaml"
    manifest.write_text(f"""---
apiVersion: 1
kind: MetadataBlock
content:
  blockHash: 2421af4d7b82d03cc3807fb7b00d82b410efb31ef36b407868ae5ae137d14186
  prevBlockHash: {"0b" * 32}
  systemTime: "{NOON_NANOS}"
  outputSlice:
    hash: {"0a" * 32}
    interval: "[2020-01-01T12:00:00Z, 2020-01-01T12:00:00Z]"
    numRecords: 10
  outputWatermark: "2020-01-01T12:00:00Z"
  inputSlices:
    - hash: {"0a" * 32}
      interval: "(-inf, 2020-01-01T12:00:00Z]"
      numRecords: 10
    - hash: {"0b" * 32}
      interval: ()
      numRecords: 0
  source:
    kind: derivative
    inputs: [input1, input2]
    transform:
      kind: sql
      engine: spark
      query: SELECT * FROM input1 UNION ALL SELECT * FROM input2
  vocab:
    eventTimeColumn: date
""")
    assert coord("block", "hash", str(manifest), cwd=tmp_path).stdout.strip() == DERIVATIVE_NANOS_HASH


def test_block_hash_ignores_the_block_hash_field_in_the_file(tmp_path):
    doc = manifest_to_dict(conformance_block())
    doc["content"]["blockHash"] = "ab" * 32
    manifest = tmp_path / "block.yaml"
    manifest.write_text(dump_yaml(doc))
    assert coord("block", "hash", str(manifest), cwd=tmp_path).stdout.strip() == CONFORMANCE_HASH


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_commit_killed_at_any_step_keeps_the_old_head_and_the_rerun_finishes_once(home, point):
    manifest = write_orders(home / "orders.yaml")
    coord("add", str(manifest), cwd=home)
    ds = Workspace.open(home).dataset(ORDERS)
    before = ds.head()
    write_orders(manifest, event_time_column="order_time")

    killed = coord("add", "--replace", str(manifest), cwd=home, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9
    chain = list(ds.blocks())  # whatever the step, the chain is valid
    assert chain[-1][0] == chain[-1][0] and (ds.head() == before) == (point != "head-updated")

    rerun = coord("add", "--replace", str(manifest), cwd=home).stdout
    assert ("unchanged" in rerun) == (point == "head-updated")
    blocks = list(ds.blocks())
    assert len(blocks) == 2 and blocks[-1][0] == before
    leftovers = {p.name for p in (ds.root / "meta" / "blocks").iterdir()}
    assert leftovers == {h.hex() for h, _ in blocks}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_ingest_killed_at_any_step_leaves_the_old_head_and_the_rerun_adds_the_data_once(home, point):
    (home / "data").mkdir()
    (home / "data" / "orders-2024-01-01.csv.gz").write_bytes(gzip.compress(
        b"order_id,customer,amount,placed_at\n1,ann,9.50,2024-01-01T10:00:00Z\n2,bob,3.25,2024-01-01T11:00:00Z\n"
    ))
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    ds = Workspace.open(home).dataset(ORDERS)
    before = ds.head()

    killed = coord("pull", ORDERS, cwd=home, env={"COORD_CRASH_AT": point}, check=False)
    assert killed.returncode == -9
    assert (ds.head() == before) == (point != "head-updated")

    coord("pull", ORDERS, cwd=home)
    summary = ds.state()
    assert summary.num_records == 2 and summary.num_blocks == 2
    assert {p.name for p in (ds.root / "data").iterdir()} == {summary.head.hex()}


@pytest.fixture
def small_disk(tmp_path):
    """A file system of its own, 3 MB (a tmpfs), for running out of space for real."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_names_the_file_and_commits_nothing(small_disk):
    home = small_disk
    coord("init", "--odf", "0.18", cwd=home)
    (home / "data").mkdir()
    rows = "".join(f"{i},customer-{i % 97},{i % 1000}.25,2024-01-01T{i % 24:02}:00:00Z\n"
                   for i in range(20_000))
    (home / "data" / "orders-2024-01-01.csv.gz").write_bytes(
        gzip.compress(b"order_id,customer,amount,placed_at\n" + rows.encode()))
    coord("add", str(MANIFESTS / f"{ORDERS}.yaml"), cwd=home)
    ds = Workspace.open(home).dataset(ORDERS)
    before = ds.head()
    free = os.statvfs(home).f_bavail * os.statvfs(home).f_frsize
    (home / "filler").write_bytes(bytes(free - 64 * 1024))  # 64 KB left: the slice needs more

    full = coord("pull", ORDERS, cwd=home, check=False)
    assert full.returncode == 1
    assert full.stderr.count("\n") == 1 and "Traceback" not in full.stderr
    assert full.stderr.startswith(f"coord: error: {ORDERS}: No space left on device: {home}/.coord/")
    assert f"nothing of this step was committed, {ORDERS} stays at block {before.hex()[:12]}" in full.stderr
    assert ds.head() == before
    assert not list(ds.root.glob("data/*")) and not list((home / ".coord" / "run").iterdir()), \
        "what the step wrote is removed at once"

    (home / "filler").unlink()
    coord("pull", ORDERS, cwd=home)
    assert ds.state().num_records == 20_000
    assert "integrity: ok" in coord("verify", ORDERS, cwd=home).stdout


def add_cities(home) -> str:
    """A root dataset reading a Parquet file, added but not pulled."""
    pq.write_table(pa.table({"city": ["Oslo", "Lima"], "population": [709037, 9751738]}),
                   home / "cities.parquet")
    (home / "cities.yaml").write_text("""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: org.example.cities
  source:
    kind: root
    fetch: {kind: url, url: cities.parquet}
    read: {kind: parquet, schema: ["city STRING", "population BIGINT"]}
    merge: {kind: ledger, primaryKey: [city]}
""")
    coord("add", str(home / "cities.yaml"), cwd=home)
    return "org.example.cities"


def test_pull_reads_a_parquet_source(home):
    cities = add_cities(home)
    assert "2 new records" in coord("pull", cities, cwd=home).stdout
    rows = json.loads(coord("tail", cities, "-o", "json", cwd=home).stdout)
    assert sorted((r["city"], r["population"]) for r in rows) == [("Lima", 9751738), ("Oslo", 709037)]
    assert rows[0]["system_time"].endswith("Z")


def test_pull_rounds_csv_decimals_half_up_to_the_declared_scale(home):
    prices = ["10.123456789012345", "-10.123456789012345", "0.000050000000000", "-0.000050000000000"]
    (home / "prices.csv").write_text("symbol,price\n" + "".join(
        f"s{i},{p}\n" for i, p in enumerate(prices)))
    (home / "prices.yaml").write_text("""
apiVersion: 1
kind: DatasetSnapshot
content:
  id: org.example.prices
  source:
    kind: root
    fetch: {kind: url, url: prices.csv}
    read: {kind: csv, header: true, schema: ["symbol STRING", "price DECIMAL(18,4)"]}
    merge: {kind: ledger, primaryKey: [symbol]}
""")
    coord("add", str(home / "prices.yaml"), cwd=home)
    assert "4 new records" in coord("pull", "org.example.prices", cwd=home).stdout
    rows = json.loads(coord("tail", "org.example.prices", "-o", "json", cwd=home).stdout)
    expected = {f"s{i}": Decimal(p).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
                for i, p in enumerate(prices)}
    assert {r["symbol"]: Decimal(r["price"]) for r in rows} == expected


def test_set_watermark_keeps_nanoseconds_through_log_list_and_verify(home):
    cities = add_cities(home)
    coord("pull", cities, cwd=home)
    t = "2099-01-01T00:00:00.123456789Z"  # after the fetch time, the watermark so far
    assert f"watermark set to {t}" in coord("pull", cities, "--set-watermark", t, cwd=home).stdout
    [newest, *_] = json.loads(coord("log", cities, "-o", "json", cwd=home).stdout)
    assert newest["outputWatermark"] == t
    assert f"outputWatermark: '{t}'" in coord("log", cities, cwd=home).stdout
    assert t in coord("list", cwd=home).stdout
    coord("verify", cities, "--integrity", cwd=home)
    earlier = coord("pull", cities, "--set-watermark", "2099-01-01T00:00:00.123456788Z", cwd=home,
                    check=False)
    assert earlier.returncode == 1 and f"is before the current watermark {t}" in earlier.stderr


def test_tail_prints_csv(home):
    cities = add_cities(home)
    coord("pull", cities, cwd=home)
    lines = coord("tail", cities, "-n", "1", "-o", "csv", cwd=home).stdout.splitlines()
    assert lines[0] == '"system_time","event_time","city","population"' and len(lines) == 2


def test_tail_as_at_a_block_or_a_time_shows_the_records_held_then(home):
    cities = add_cities(home)
    coord("pull", cities, cwd=home)
    first = json.loads(coord("log", cities, "-o", "json", cwd=home).stdout)[0]
    pq.write_table(pa.table({"city": ["Oslo", "Lima", "Pune"], "population": [1, 2, 3]}),
                   home / "cities.parquet")
    assert "1 new record" in coord("pull", cities, cwd=home).stdout

    def cities_as_at(*args):
        rows = json.loads(coord("tail", cities, "-o", "json", *args, cwd=home).stdout)
        return sorted(r["city"] for r in rows)

    assert cities_as_at() == ["Lima", "Oslo", "Pune"]
    assert cities_as_at("--as-at", first["blockHash"][:8]) == ["Lima", "Oslo"]
    assert cities_as_at("--as-at", first["systemTime"]) == ["Lima", "Oslo"]
    assert cities_as_at("--as-at", "2000-01-01T00:00:00Z") == []
    proc = coord("tail", cities, "--as-at", "2020-13-01T00:00:00Z", cwd=home, check=False)
    assert proc.returncode == 1 and "not a valid timestamp" in proc.stderr


def test_config_set_changes_the_engine_runtime_and_refuses_unknown_ones(home):
    coord("config", "set", "engine.runtime", "sandbox", cwd=home)
    assert coord("config", "get", "engine.runtime", cwd=home).stdout.strip() == "sandbox"
    proc = coord("config", "set", "engine.runtime", "vm", cwd=home, check=False)
    assert proc.returncode == 1 and "must be one of" in proc.stderr
    assert coord("config", "get", "engine.runtime", cwd=home).stdout.strip() == "sandbox"


def test_the_bounds_of_a_served_query_are_settings_checked_when_set(home):
    coord("config", "set", "serve.sqlMaxBytes", "4MiB", cwd=home)
    coord("config", "set", "serve.sqlTimeout", "5s", cwd=home)
    assert coord("config", "get", "serve.sqlMaxBytes", cwd=home).stdout.strip() == str(4 << 20)
    assert coord("config", "get", "serve.sqlTimeout", cwd=home).stdout.strip() == "5s"
    proc = coord("config", "set", "serve.sqlMaxRows", "0", cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "serve.sqlMaxRows: expected a whole number of at least 1 (got 0)" in proc.stderr


def test_a_remote_spark_master_needs_network_to_be_allowed_explicitly(home):
    proc = coord("config", "set", "engine.sparkMaster", "spark://127.0.0.1:7077", cwd=home, check=False)
    assert proc.returncode == 1 and "engine.allowNetwork" in proc.stderr
    coord("config", "set", "engine.allowNetwork", "true", cwd=home)
    coord("config", "set", "engine.sparkMaster", "spark://127.0.0.1:7077", cwd=home)
