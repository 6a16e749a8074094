"""ODF 0.39 YAML manifests: the reference's forms (kamu-cli v0.265.0 test_serde_yaml.rs)."""
from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s
from coordinator.metadata.odf39.manifests import dump_manifest, load_manifest
from coordinator.metadata.shape import union_of
from coordinator.metadata.yaml_codec import DecodeError, from_dict, to_dict, union_from_dict
from tests.metadata.odf39_vectors import DATA_SCHEMA, RAW_ARROW_SCHEMA, block, execute_transform
from tests.metadata.strategies import blocks39, snapshots39


def text(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


BLOCK_HEADER = """\
    kind: MetadataBlock
    version: 3
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
"""

EXECUTE_TRANSFORM_BLOCK = text(BLOCK_HEADER + """\
      sequenceNumber: 127
      event:
        kind: ExecuteTransform
        queryInputs:
        - datasetId: did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4
          prevBlockHash: f162080084bf2fba02475726feb2cab2d8215eab14bc6bdd8bfb2c8151257032ecd8b
          newBlockHash: f1620b039179a8a4ce2c252aa6f2f25798251c19b75fc1508d9d511a191e0487d64a7
          prevOffset: 9
          newOffset: 20
        - datasetId: did:odf:fed01826ef0a9abea3a3a826ef0a9abea3a3a90e6065747270300c1d3b30a2cd9d724
          prevBlockHash: f162080084bf2fba02475726feb2cab2d8215eab14bc6bdd8bfb2c8151257032ecd8b
          newBlockHash: f1620b039179a8a4ce2c252aa6f2f25798251c19b75fc1508d9d511a191e0487d64a7
        prevCheckpoint: f1620894b355f91b194f31c1116dcec200b68d5cfd90a3df19032829fa643bc711fcb
        prevOffset: 9
        newData:
          logicalHash: f162076d3bc41c9f588f7fcd0d5bf4718f8f84b1c41b20882703100b9eb9413807c01
          physicalHash: f1620cceefd7e0545bcf8b6d19f3b5750c8a3ee8350418877bc6fb12e32de28137355
          offsetInterval:
            start: 10
            end: 19
          size: 10
        newWatermark: 2020-01-01T12:00:00Z
""")


def test_metadata_block_is_written_as_the_reference_writes_it():
    assert dump_manifest(block(execute_transform(), 127)) == EXECUTE_TRANSFORM_BLOCK


def test_metadata_block_manifest_reads_back():
    assert load_manifest(EXECUTE_TRANSFORM_BLOCK) == block(execute_transform(), 127)


def test_obsolete_block_manifest_version_is_refused_by_number():
    old = EXECUTE_TRANSFORM_BLOCK.replace("version: 3", "version: 1")
    with pytest.raises(DecodeError, match="version 1 is not supported"):
        load_manifest(old)


SET_DATA_SCHEMA_BLOCK = text(BLOCK_HEADER + """\
      sequenceNumber: 123
      event:
        kind: SetDataSchema
        schema:
          fields:
          - name: city
            type:
              kind: String
            extra:
              arrow.apache.org/bufferEncoding:
                kind: View
                offsetBitWidth: 32
          - name: population
            type:
              kind: UInt64
          - name: census
            type:
              kind: Option
              inner:
                kind: String
            extra:
              opendatafabric.org/type:
                kind: ObjectLink
                linkType:
                  kind: Multihash
          - name: links
            type:
              kind: List
              itemType:
                kind: String
          extra:
            kamu.dev/archetype: Collection
""")


def test_data_schema_block_round_trips_in_the_reference_form():
    b = block(e.SetDataSchema(schema=DATA_SCHEMA), 123)
    assert dump_manifest(b) == SET_DATA_SCHEMA_BLOCK
    assert load_manifest(SET_DATA_SCHEMA_BLOCK) == b


def test_legacy_raw_arrow_schema_is_written_in_base64():
    b = block(e.SetDataSchema(raw_arrow_schema=RAW_ARROW_SCHEMA), 123)
    expected = text(BLOCK_HEADER + f"""\
      sequenceNumber: 123
      event:
        kind: SetDataSchema
        rawArrowSchema: {RAW_ARROW_SCHEMA}
""")
    assert dump_manifest(b) == expected
    assert load_manifest(expected) == b


ROOT_SNAPSHOT = text("""
    kind: DatasetSnapshot
    version: 1
    content:
      name: kamu.test
      kind: Root
      metadata:
      - kind: SetPollingSource
        fetch:
          kind: Url
          url: ftp://kamu.dev/test.zip
          cache:
            kind: Forever
        prepare:
        - kind: Decompress
          format: Zip
          subPath: data_*.csv
        read:
          kind: Csv
          header: true
        preprocess:
          kind: Sql
          engine: spark
          query: SELECT * FROM input
        merge:
          kind: Snapshot
          primaryKey:
          - id
""")


def test_root_dataset_snapshot_reads_and_writes_back_identically():
    expected = e.DatasetSnapshot(name="kamu.test", kind=e.DatasetKind.ROOT, metadata=[
        e.SetPollingSource(
            fetch=s.FetchStepUrl(url="ftp://kamu.dev/test.zip", cache=s.SourceCachingForever()),
            prepare=[s.PrepStepDecompress(format=s.CompressionFormat.ZIP, sub_path="data_*.csv")],
            read=s.ReadStepCsv(header=True),
            preprocess=s.TransformSql(engine="spark", query="SELECT * FROM input"),
            merge=s.MergeStrategySnapshot(primary_key=["id"]),
        )])
    assert load_manifest(ROOT_SNAPSHOT, e.DatasetSnapshot) == expected
    assert dump_manifest(expected) == ROOT_SNAPSHOT


@pytest.mark.parametrize(("name", "refs"), [
    ("com.naturalearthdata.admin0",
     ["com.naturalearthdata.10m.admin0", "com.naturalearthdata.50m.admin0"]),
    ("a/com.naturalearthdata.admin0",  # multi-tenant references
     ["b/com.naturalearthdata.10m.admin0", "c/com.naturalearthdata.50m.admin0"]),
])
def test_derivative_dataset_snapshot_reads_and_writes_back_identically(name, refs):
    manifest = text(f"""
        kind: DatasetSnapshot
        version: 1
        content:
          name: {name}
          kind: Derivative
          metadata:
          - kind: SetTransform
            inputs:
            - datasetRef: {refs[0]}
            - datasetRef: {refs[1]}
            transform:
              kind: Sql
              engine: spark
              query: SOME_SQL
    """)
    expected = e.DatasetSnapshot(name=name, kind=e.DatasetKind.DERIVATIVE, metadata=[
        e.SetTransform(inputs=[e.TransformInput(dataset_ref=r) for r in refs],
                       transform=s.TransformSql(engine="spark", query="SOME_SQL"))])
    assert load_manifest(manifest) == expected
    assert dump_manifest(expected) == manifest


def test_a_snapshot_is_refused_where_a_block_is_expected():
    with pytest.raises(DecodeError, match="expected MetadataBlock"):
        load_manifest(ROOT_SNAPSHOT, e.MetadataBlock)


READ_STEP = union_of(s.ReadStepNdJson)


@pytest.mark.parametrize("tag", ["NdJson", "ndJson", "ndjson"])
def test_kind_tags_are_read_as_written_in_camel_case_or_lowercase(tag):
    value = union_from_dict(READ_STEP, {"kind": tag, "encoding": "utf-8"})
    assert value == s.ReadStepNdJson(encoding="utf-8")
    assert to_dict(value) == {"kind": "NdJson", "encoding": "utf-8"}


def test_kind_tags_in_other_cases_are_refused():
    with pytest.raises(DecodeError, match="expected one of"):
        union_from_dict(READ_STEP, {"kind": "nDjson", "encoding": "utf-8"})


@pytest.mark.parametrize(("written", "accepted"), [
    ("ByEventTime", True), ("byEventTime", True), ("byeventtime", True), ("bYeventtime", False),
])
def test_enum_names_are_read_in_the_cases_rfc013_allows(written, accepted):
    data = {"kind": "FilesGlob", "path": "/opt/x/*.txt", "order": written}
    if accepted:
        assert union_from_dict(union_of(s.FetchStepUrl), data).order is s.SourceOrdering.BY_EVENT_TIME
    else:
        with pytest.raises(DecodeError, match="order"):
            union_from_dict(union_of(s.FetchStepUrl), data)


def test_fetch_step_files_glob_round_trips():
    data = {"kind": "FilesGlob", "path": "/opt/x/*.txt", "cache": {"kind": "Forever"}, "order": "ByName"}
    value = union_from_dict(union_of(s.FetchStepUrl), data)
    assert value == s.FetchStepFilesGlob(path="/opt/x/*.txt", cache=s.SourceCachingForever(),
                                         order=s.SourceOrdering.BY_NAME)
    assert to_dict(value) == data


def test_transform_with_queries_and_temporal_tables_round_trips():
    data = {"kind": "Sql", "engine": "flink", "queries": [{"alias": "bar", "query": "SELECT * FROM foo"}],
            "temporalTables": [{"name": "foo", "primaryKey": ["id"]}]}
    value = union_from_dict(union_of(s.TransformSql), data)
    assert value == s.TransformSql(engine="flink",
                                   queries=[s.SqlQueryStep(alias="bar", query="SELECT * FROM foo")],
                                   temporal_tables=[s.TemporalTable(name="foo", primary_key=["id"])])
    assert to_dict(value) == data


def test_data_type_short_form_reads_as_the_long_form_and_writes_long():
    schema = from_dict(d.DataSchema, {"fields": [
        {"name": "long", "type": {"kind": "Timestamp"}},
        {"name": "short", "type": "Timestamp"},
        {"name": "full", "type": {"kind": "Timestamp", "unit": "Nanosecond", "timezone": "UTC"}},
    ]})
    assert [f.type for f in schema.fields] == [
        d.DataTypeTimestamp(), d.DataTypeTimestamp(),
        d.DataTypeTimestamp(unit=d.TimeUnit.NANOSECOND, timezone="UTC")]
    assert to_dict(schema)["fields"][1] == {"name": "short", "type": {"kind": "Timestamp"}}


def test_data_type_short_form_with_an_unknown_type_is_refused():
    with pytest.raises(DecodeError, match=r"fields\[0\].type.kind: expected one of"):
        from_dict(d.DataSchema, {"fields": [{"name": "short", "type": "Invalid"}]})


def test_extra_attributes_keep_their_json_values():
    attrs = {"arrow.apache.org/offsetBitWidth": 32, "opendatafabric.org/description": "foobar",
             "opendatafabric.org/type": {"kind": "ObjectLink", "linkType": {"kind": "Multihash"}}}
    schema = from_dict(d.DataSchema, {"fields": [], "extra": attrs})
    assert schema.extra == d.ExtraAttributes.from_json(attrs)
    assert to_dict(schema)["extra"] == attrs


def test_a_malformed_hash_is_refused_at_its_place():
    broken = EXECUTE_TRANSFORM_BLOCK.replace("prevCheckpoint: f1620", "prevCheckpoint: x1620")
    with pytest.raises(DecodeError, match="content.event.prevCheckpoint: .*multibase"):
        load_manifest(broken)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(blocks39, snapshots39))
def test_any_block_or_snapshot_round_trips_through_yaml(obj):
    assert load_manifest(dump_manifest(obj)) == obj
