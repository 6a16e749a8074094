"""Loading manifests: valid ones become dataclasses, invalid ones name the file and the path."""
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.metadata import objects
from coordinator.metadata.ids import MAX_ID_LENGTH
from coordinator.metadata.manifest import MAX_MANIFEST, ManifestError, load_manifest, load_manifests
from coordinator.metadata.timestamps import TimeInterval
from coordinator.metadata.yaml_codec import MAX_DEPTH, MAX_VALUES, render

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "manifests"

ORDERS = """\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: com.example.orders
  source:
    kind: root
    fetch:
      kind: filesGlob
      path: data/orders-*.csv
      order: byName
    read:
      kind: csv
      header: true
    merge:
      kind: ledger
      primaryKey: [order_id]
"""

DAILY = """\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: com.example.orders-daily
  source:
    kind: derivative
    inputs: [com.example.orders, com.example.customers]
    transform:
      kind: sql
      engine: flink
      temporalTables:
        - id: com.example.customers
          primaryKey: [customer_id]
      query: SELECT * FROM `com.example.orders`
"""


def write(tmp_path: Path, text: str, name: str = "orders.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    return str(err.value)


# --- valid manifests ---------------------------------------------------------------------------


def test_kamu_style_root_manifest_loads_unchanged():
    snapshot = load_manifest(FIXTURES / "ca.bccdc.covid19.case-details.yaml")
    assert isinstance(snapshot, objects.DatasetSnapshot)
    root = snapshot.source
    assert isinstance(root, objects.DatasetSourceRoot)
    assert isinstance(root.fetch, objects.FetchStepUrl)
    assert isinstance(root.read, objects.ReadStepCsv) and root.read.header is True
    assert isinstance(root.preprocess, objects.TransformSql) and root.preprocess.engine == "spark"
    assert isinstance(root.merge, objects.MergeStrategySnapshot)
    assert root.merge.primary_key == ["date", "ha", "sex", "age_group"]
    assert snapshot.vocab.event_time_column == "date"


def test_files_glob_ledger_manifest_loads():
    root = load_manifest(FIXTURES / "com.example.orders.yaml").source
    assert isinstance(root.fetch, objects.FetchStepFilesGlob)
    assert root.fetch.order is objects.SourceOrdering.BY_NAME
    assert isinstance(root.fetch.event_time, objects.EventTimeSourceFromPath)
    assert root.prepare == [objects.PrepStepDecompress(format=objects.CompressionFormat.GZIP)]
    assert root.merge == objects.MergeStrategyLedger(primary_key=["order_id"])


def test_flink_derivative_loads(tmp_path):
    snapshot = load_manifest(write(tmp_path, DAILY))
    derivative = snapshot.source
    assert isinstance(derivative, objects.DatasetSourceDerivative)
    assert derivative.inputs == ["com.example.orders", "com.example.customers"]
    assert derivative.transform.engine == "flink"
    assert derivative.transform.temporal_tables == [
        objects.TemporalTable(id="com.example.customers", primary_key=["customer_id"])
    ]


def test_metadata_block_manifest_round_trips(tmp_path):
    t = datetime(2020, 1, 1, tzinfo=UTC)
    block = objects.MetadataBlock(
        block_hash=bytes(range(32)),
        system_time=t,
        output_slice=objects.DataSlice(
            hash=bytes(32), interval=TimeInterval.singleton(t), num_records=3, physical_hash=bytes(32)
        ),
        engine=objects.EngineIdentity(runtime="sandbox", network_isolated=True),
    )
    assert load_manifest(write(tmp_path, render(block), "block.yaml")) == block


def test_directory_loads_every_yaml_file_sorted(tmp_path):
    for fixture in FIXTURES.iterdir():
        if fixture.is_file():  # reference/: the current form's examples, in folders
            shutil.copy(fixture, tmp_path / fixture.name)
    (tmp_path / "orders.yml").write_text(ORDERS.replace("com.example.orders", "com.example.z"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    ids = [s.id for s in load_manifests([tmp_path])]
    assert ids == [
        "ca.bccdc.covid19.case-details",
        "com.example.orders.daily",
        "com.example.orders",
        "com.example.z",
    ]


def test_files_and_directories_mix_in_the_given_order(tmp_path):
    single = write(tmp_path, DAILY, "daily.yaml")
    loaded = load_manifests([single, FIXTURES])
    assert [s.id for s in loaded][:2] == ["com.example.orders-daily", "ca.bccdc.covid19.case-details"]


# --- errors name the file and the path ---------------------------------------------------------


def test_missing_primary_key(tmp_path):
    path = write(tmp_path, ORDERS.replace("      primaryKey: [order_id]\n", ""))
    assert load_error(path) == f"{path}: content.source.merge.primaryKey: is required"


def test_wrong_type(tmp_path):
    path = write(tmp_path, ORDERS.replace("primaryKey: [order_id]", "primaryKey: order_id"))
    assert load_error(path) == (
        f"{path}: content.source.merge.primaryKey: expected a list of strings (got 'order_id')"
    )


def test_unknown_field_with_a_typo(tmp_path):
    path = write(tmp_path, ORDERS.replace("primaryKey:", "primaryKy:"))
    assert load_error(path) == (
        f"{path}: content.source.merge: unknown field 'primaryKy' "
        "(expected one of: kind, primaryKey); did you mean 'primaryKey'?"
    )


def test_bad_kind_tag(tmp_path):
    path = write(tmp_path, ORDERS.replace("kind: ledger", "kind: ledgr"))
    assert load_error(path) == (
        f"{path}: content.source.merge.kind: expected one of: append, ledger, snapshot "
        "(got 'ledgr'); did you mean 'ledger'?"
    )


def test_missing_kind_tag(tmp_path):
    path = write(tmp_path, ORDERS.replace("      kind: csv\n", ""))
    assert load_error(path) == f"{path}: content.source.read.kind: is required"


def test_bad_enum(tmp_path):
    path = write(tmp_path, ORDERS.replace("order: byName", "order: name"))
    assert load_error(path) == (
        f"{path}: content.source.fetch.order: expected one of: byEventTime, byName (got 'name')"
        "; did you mean 'byName'?"
    )


def test_bad_dataset_id(tmp_path):
    path = write(tmp_path, ORDERS.replace("id: com.example.orders", "id: com.example_orders"))
    assert load_error(path).startswith(
        f"{path}: content.id: not a valid dataset id: 'com.example_orders' (dot-separated parts"
    )


def test_bad_derivative_input_id_names_the_list_index(tmp_path):
    path = write(tmp_path, DAILY.replace("com.example.customers]", "com..customers]"))
    assert load_error(path).startswith(
        f"{path}: content.source.inputs[1]: not a valid dataset id: 'com..customers'"
    )


def test_wrong_api_version(tmp_path):
    path = write(tmp_path, ORDERS.replace("apiVersion: 1", "apiVersion: 2"))
    assert load_error(path) == f"{path}: apiVersion: expected 1 (got 2)"


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, ORDERS.replace("order: byName", "order: byName: yes"))
    assert load_error(path) == (
        f"{path}: line 10, column 20: invalid YAML: mapping values are not allowed in this context"
    )


def test_codec_error_is_wrapped_with_its_path(tmp_path):
    # the schema accepts the shape of this timestamp; only the codec knows February has no 30th
    text = f"apiVersion: 1\nkind: MetadataBlock\ncontent:\n  blockHash: {'ab' * 32}\n"
    path = write(tmp_path, text + "  systemTime: 2020-02-30T00:00:00Z\n", "block.yaml")
    assert load_error(path) == (
        f"{path}: content.systemTime: not a valid timestamp: "
        "'2020-02-30T00:00:00Z' (day is out of range for month)"
    )


def test_empty_file(tmp_path):
    path = write(tmp_path, "")
    assert load_error(path) == f"{path}: expected a mapping (got nothing)"


def test_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    assert load_error(path) == f"{path}: No such file or directory"


# --- hostile manifests: refused in one line, at once -------------------------------------------

def nested_aliases(levels: int) -> str:
    """An alias bomb: each level's list holds the previous one nine times (9**levels values)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_where_it_passes_the_values_cap(tmp_path):
    path = write(tmp_path, ORDERS + nested_aliases(9))
    assert load_error(path) == (f"{path}: line 21, column 15: invalid YAML: more than "
                                f"{MAX_VALUES:,} values (an alias counts as the values it stands for)")


def test_an_alias_within_the_cap_is_expanded(tmp_path):
    text = DAILY.replace(", com.example.customers]", ", &c com.example.customers]")
    snapshot = load_manifest(write(tmp_path, text.replace("- id: com.example.customers", "- id: *c")))
    assert snapshot.source.transform.temporal_tables[0].id == "com.example.customers"


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    path = write(tmp_path, ORDERS.replace("primaryKey: [order_id]", "primaryKey: &k [*k]"))
    assert load_error(path) == f"{path}: line 16, column 23: invalid YAML: an alias inside its own anchor"


def test_deep_nesting_is_refused_with_its_line(tmp_path):
    path = write(tmp_path, ORDERS.replace("[order_id]", "[" * 1000 + "]" * 1000))
    assert load_error(path) == (f"{path}: line 16, column {19 + MAX_DEPTH - 4}: invalid YAML: "
                                f"nested more than {MAX_DEPTH} levels deep")


def test_a_duplicate_key_is_refused_naming_both_lines(tmp_path):
    path = write(tmp_path, ORDERS.replace("      order: byName\n", "      order: byName\n      path: x\n"))
    assert load_error(path) == (f"{path}: line 11, column 7: invalid YAML: duplicate key 'path' "
                                "(first on line 9)")


def test_a_manifest_over_the_size_cap_is_refused_before_parsing(tmp_path):
    path = write(tmp_path, ORDERS + "#" * MAX_MANIFEST)
    assert load_error(path) == (f"{path}: larger than {MAX_MANIFEST} bytes (4 MiB): a manifest holds "
                                "metadata; data belongs in the files it names")


def test_a_manifest_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(ORDERS.encode() + b"# caf\xe9\n")
    assert load_error(path) == f"{path}: not UTF-8 text (byte {len(ORDERS) + 5})"


def test_an_over_long_id_is_refused_naming_the_limit(tmp_path):
    long_id = ".".join(["part"] * 1000)
    path = write(tmp_path, ORDERS.replace("id: com.example.orders", f"id: {long_id}"))
    assert load_error(path) == (f"{path}: content.id: dataset id longer than {MAX_ID_LENGTH} characters "
                                f"({len(long_id):,}): {repr(long_id)[:57]}...")
    assert load_manifest(write(tmp_path, ORDERS.replace("com.example.orders", "a" * MAX_ID_LENGTH)))


def test_a_temporal_table_may_say_name_for_id(tmp_path):
    """The current ODF's word; the 0.18 manifests' ``id`` is what is stored."""
    text = DAILY.replace("- id: com.example.customers", "- name: com.example.customers")
    snapshot = load_manifest(write(tmp_path, text))
    assert snapshot.source.transform.temporal_tables[0].id == "com.example.customers"
