"""Manifests in the current ODF form (``kind: DatasetSnapshot, version: 1``) load as the ODF 0.18
snapshots a workspace holds: the reference's own examples (tests/fixtures/manifests/reference,
kamu-cli v0.265.0 examples/), what maps, what is refused and where, and what is left out."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.metadata import objects as o
from coordinator.metadata.manifest import load_manifest, read_manifest
from tests.metadata.test_manifest import load_error, write

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "fixtures" / "manifests" / "reference"




def test_a_root_of_the_reference_loads_as_the_0_18_root_it_describes():
    loaded = read_manifest(REFERENCE / "currency_conversion" / "my.trading.transactions.yaml")
    assert loaded.odf == "0.39" and loaded.notes == ()
    assert loaded.content == o.DatasetSnapshot(
        id="my.trading.transactions",
        source=o.DatasetSourceRoot(
            fetch=o.FetchStepFilesGlob(path="data/transactions.csv"),
            read=o.ReadStepCsv(header=True, schema=[
                "event_time TIMESTAMP(3)", "symbol STRING", "quantity BIGINT", "price DOUBLE",
                "settlement DOUBLE", "currency STRING"]),
            merge=o.MergeStrategyLedger(primary_key=["event_time"]),
        ),
    )


def test_prepare_steps_preprocess_and_vocab_map_to_their_0_18_fields():
    path = REFERENCE / "currency_conversion" / "ca.bankofcanada.exchange-rates.daily.yaml"
    snapshot = load_manifest(path)
    source = snapshot.source
    assert source.prepare == [o.PrepStepPipe(command=["sed", "-e", "1,/OBSERVATIONS/d"])]
    assert source.preprocess.engine == "datafusion" and "FXUSDCAD as rate" in source.preprocess.query
    assert source.read.schema[:2] == ["date TIMESTAMP(3)", "FXAUDCAD DOUBLE"]  # flow-style fields
    assert snapshot.vocab == o.DatasetVocabulary(event_time_column="date")


def test_a_derivative_names_its_inputs_by_dataset_ref_and_temporal_tables_by_name():
    source = load_manifest(REFERENCE / "currency_conversion" / "my.trading.transactions.cad.yaml").source
    assert source.inputs == ["ca.bankofcanada.exchange-rates.daily", "my.trading.transactions"]
    assert source.transform.engine == "flink"
    assert source.transform.temporal_tables == [
        o.TemporalTable(id="ca.bankofcanada.exchange-rates.daily", primary_key=["currency_base"])]


def test_query_steps_keep_their_aliases():
    path = REFERENCE / "overdue_shipments" / "com.acme.shipments.overdue.yaml"
    transform = load_manifest(path).source.transform
    assert [step.alias for step in transform.queries] == ["order_shipments", "order_shipments_agg", None]


def test_optional_fields_read_as_nullable_ddl_columns():
    schema = load_manifest(REFERENCE / "covid" / "alberta.case-details.yaml").source.read.schema
    assert schema == ["id BIGINT", "date_reported TIMESTAMP(3)", "zone STRING", "gender STRING",
                      "age_group STRING", "case_status STRING", "case_type STRING"]


def test_descriptive_events_are_left_out_with_a_note_naming_each():
    path = REFERENCE / "covid" / "british-columbia.case-details.hm.yaml"
    loaded = read_manifest(path)
    assert loaded.content.source.inputs == ["covid19.british-columbia.case-details"]
    assert [note.split(": ")[1:3] for note in loaded.notes] == [
        ["content.metadata[2]", "SetInfo left out"],
        ["content.metadata[3]", "SetAttachments left out"],
        ["content.metadata[4]", "SetLicense left out"],
    ]
    assert all(note.startswith(f"{path}: ") for note in loaded.notes)


@pytest.mark.parametrize(("example", "place", "what"), [
    ("leaderboard/leaderboard.yaml", "content.metadata[0].inputs[0].alias",
     "an alias (player_scores) other than the input's name is not supported"),
    ("mqtt/temp.yaml", "content.metadata[0].fetch", "fetch kind Mqtt is not supported"),
    ("reth-vs-snp500/net.rocketpool.reth.tokens-minted.yaml", "content.metadata[0].fetch",
     "fetch kind EthereumLogs is not supported"),
])
def test_what_a_0_18_workspace_cannot_hold_is_refused_at_its_place(example, place, what):
    path = REFERENCE / example
    message = load_error(path)
    assert message.startswith(f"{path}: {place}: {what} by ODF 0.18 workspaces yet (")


ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {fetch}
      read: {read}
      merge: {merge}
"""


def root(tmp_path: Path, name: str = "towns", fetch: str = "{kind: FilesGlob, path: 'data/*.csv'}",
         read: str = "{kind: Csv, header: true, ddlSchema: ['town STRING', 'population BIGINT']}",
         merge: str = "{kind: Append}", more: str = "", file: str = "current.yaml") -> Path:
    return write(tmp_path, ROOT.format(name=name, fetch=fetch, read=read, merge=merge) + more, file)


def test_the_0_18_form_and_the_current_form_of_one_dataset_load_alike(tmp_path):
    old = write(tmp_path, """\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: towns
  source:
    kind: root
    fetch: {kind: filesGlob, path: 'data/*.csv', order: byName}
    read: {kind: csv, header: true, schema: ['town STRING', 'population BIGINT']}
    merge: {kind: ledger, primaryKey: [town]}
  vocab: {eventTimeColumn: seen}
""", "old.yaml")
    current = root(tmp_path, fetch="{kind: FilesGlob, path: 'data/*.csv', order: ByName}",
                   merge="{kind: Ledger, primaryKey: [town]}",
                   more="    - {kind: SetVocab, eventTimeColumn: seen}\n")
    assert load_manifest(current) == load_manifest(old)


def test_kind_tags_and_enum_names_are_read_in_any_rfc013_case(tmp_path):
    written = root(tmp_path, fetch="{kind: FilesGlob, path: 'data/*.csv', order: ByEventTime}")
    lower = root(tmp_path, file="lower.yaml",
                 fetch="{kind: filesglob, path: 'data/*.csv', order: byEventTime}",
                 read="{kind: csv, header: true, ddlSchema: ['town STRING', 'population BIGINT']}",
                 merge="{kind: append}")
    assert load_manifest(written) == load_manifest(lower)
    assert load_manifest(written).source.fetch.order is o.SourceOrdering.BY_EVENT_TIME


def test_the_current_forms_defaults_are_written_out_where_0_18s_differ(tmp_path):
    path = root(tmp_path, read="{kind: Csv, timestampFormat: rfc3339, dateFormat: '%d.%m.%Y'}")
    step = load_manifest(path).source.read
    assert step.infer_schema is False  # without a schema the current form reads text
    assert step.timestamp_format is None  # rfc3339: what 0.18 reads without a format
    assert step.date_format == "%d.%m.%Y"


def test_an_event_time_from_system_time_is_0_18s_default(tmp_path):
    path = root(tmp_path, fetch="{kind: Url, url: 'data/a.csv', eventTime: {kind: FromSystemTime}}")
    assert load_manifest(path).source.fetch == o.FetchStepUrl(url="data/a.csv")


@pytest.mark.parametrize(("field_type", "ddl"), [
    ("{kind: Timestamp, unit: Microsecond, timezone: UTC}", "TIMESTAMP(6)"),
    ("{kind: Decimal, precision: 10, scale: 2}", "DECIMAL(10,2)"),
    ("{kind: Option, inner: Int16}", "SMALLINT"),
    ("{kind: Time, unit: Microsecond}", "TIME"),
    ("Time", "TIME(3)"),  # no unit: milliseconds (kamu-cli 0.263 on)
    ("{kind: Time, unit: Nanosecond}", "TIME(9)"),
    ("Timestamp", "TIMESTAMP(3)"),  # no unit, no timezone: milliseconds, UTC
    ("Binary", "BINARY"),
])
def test_odf_schema_types_become_ddl_types(tmp_path, field_type, ddl):
    fields = f"[{{name: 'unit price', type: {field_type}}}]"
    path = root(tmp_path, read=f"{{kind: Parquet, schema: {{fields: {fields}}}}}")
    assert load_manifest(path).source.read.schema == [f"`unit price` {ddl}"]


@pytest.mark.parametrize("field_type", ["UInt64", "{kind: Timestamp, timezone: Europe/Oslo}",
                                        "{kind: List, itemType: String}"])
def test_a_type_ddl_cannot_say_is_refused_at_the_field(tmp_path, field_type):
    path = root(tmp_path, read=f"{{kind: Csv, schema: {{fields: [{{name: a, type: {field_type}}}]}}}}")
    place = "content.metadata[0].read.schema.fields[0].type"
    assert load_error(path).startswith(f"{path}: {place}: the data type ")


@pytest.mark.parametrize(("more", "place", "what"), [
    ("    - {kind: SetVocab, offsetColumn: o}\n", "content.metadata[1].offsetColumn", "offsetColumn is not"),
    ("    - {kind: SetVocab}\n    - {kind: SetVocab}\n", "content.metadata[2]", "a second SetVocab is not"),
    ("    - {kind: SetDataSchema, schema: {fields: []}}\n", "content.metadata[1]", "SetDataSchema is not"),
    ("    - {kind: DisablePollingSource}\n", "content.metadata[1]", "DisablePollingSource is not"),
])
def test_events_without_a_0_18_place_are_refused(tmp_path, more, place, what):
    path = root(tmp_path, more=more)
    assert load_error(path).startswith(f"{path}: {place}: {what} supported by ODF 0.18 workspaces yet (")


def test_stream_merges_are_refused(tmp_path):
    path = root(tmp_path, merge="{kind: ChangelogStream, primaryKey: [town]}")
    assert load_error(path).startswith(f"{path}: content.metadata[0].merge: merge kind ChangelogStream "
                                    "is not supported")


DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: big.towns
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{inputs}]
      transform: {{kind: Sql, engine: spark, query: 'SELECT * FROM towns'}}
"""


def test_an_input_named_by_its_did_is_refused_for_now(tmp_path):
    did = "did:odf:fed01" + "ab" * 32
    path = write(tmp_path, DERIVATIVE.format(inputs=f"{{datasetRef: '{did}'}}"))
    assert load_error(path) == (f"{path}: content.metadata[0].inputs[0].datasetRef: an input named by its "
                             f"id ({did}) is not supported by ODF 0.18 workspaces yet (name it by its "
                             "dataset name)")


def test_an_alias_equal_to_the_inputs_name_is_accepted(tmp_path):
    path = write(tmp_path, DERIVATIVE.format(inputs="{datasetRef: towns, alias: towns}"))
    assert load_manifest(path).source.inputs == ["towns"]


def test_a_0_18_rule_on_an_input_is_named_where_the_file_says_it(tmp_path):
    path = write(tmp_path, DERIVATIVE.format(inputs="{datasetRef: my_towns}"))
    assert load_error(path).startswith(f"{path}: content.metadata[0].inputs[0].datasetRef: "
                                    "not a valid dataset id: 'my_towns'")


def test_a_0_18_rule_on_the_name_is_named_where_the_file_says_it(tmp_path):
    path = root(tmp_path, name="big_towns")
    assert load_error(path).startswith(f"{path}: content.name: not a valid dataset id: 'big_towns'")


def test_a_source_that_does_not_fit_the_datasets_kind_is_refused(tmp_path):
    path = write(tmp_path, DERIVATIVE.format(inputs="{datasetRef: towns}").replace("Derivative", "Root"))
    assert load_error(path).startswith(f"{path}: content.metadata[0]: a Root dataset has no SetTransform")


def test_a_mistake_of_the_current_form_is_named_as_its_loader_names_it(tmp_path):
    path = root(tmp_path, merge="{kind: Ledger}")
    assert load_error(path) == f"{path}: content.metadata[0].merge.primaryKey: is required"


def test_ddl_strings_in_the_schema_field_are_refused_pointing_to_ddl_schema(tmp_path):
    path = root(tmp_path, read="{kind: Csv, header: true, schema: ['town STRING']}")
    assert load_error(path) == (
        f"{path}: content.metadata[0].read.schema: expected a mapping for DataSchema, got list "
        '(DDL strings such as "id BIGINT" go in ddlSchema; schema takes {fields: [{name, type}]})')
    path = root(tmp_path, read="{kind: Csv, schema: {fields: [{name: town, type: 7}]}}")
    assert "ddlSchema" not in load_error(path)  # a mistake inside a schema is named alone


def test_the_manifest_reference_shows_the_current_form_with_a_reference_example_that_loads(tmp_path):
    docs = (REPO / "docs" / "manifests.md").read_text(encoding="utf-8")
    current = [b for b in re.findall(r"^```yaml\n(.*?)^```", docs, re.M | re.S) if "\nversion: 1\n" in b]
    assert len(current) == 1
    shipped = REFERENCE / "currency_conversion" / "my.trading.transactions.yaml"
    assert load_manifest(write(tmp_path, current[0])) == load_manifest(shipped)
