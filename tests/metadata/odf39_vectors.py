"""The reference's test fixtures for ODF 0.39 (kamu-cli v0.265.0, src/odf/metadata/tests/tests/):
its events and blocks, rebuilt with our objects, and its test-only seeded identities."""
from __future__ import annotations

import struct
from datetime import UTC, datetime

from coordinator.metadata.did import DatasetId
from coordinator.metadata.multiformats import Multihash
from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s

_M64 = (1 << 64) - 1


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & _M64


def seeded_dataset_id(seed: bytes) -> DatasetId:
    """The reference's ``DatasetID::new_seeded_ed25519``: 32 bytes of rand's ``SmallRng``
    (xoshiro256++ on 64-bit targets) seeded with ``seed`` zero-padded to 32 bytes, taken as
    the key. A test fixture: the bytes are not a point on the curve, only an identity."""
    s0, s1, s2, s3 = struct.unpack("<4Q", seed.ljust(32, b"\0"))
    out = b""
    for _ in range(4):
        out += struct.pack("<Q", (_rotl((s0 + s3) & _M64, 23) + s0) & _M64)
        t = (s1 << 17) & _M64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = _rotl(s3, 45)
    return DatasetId(out)


def sha3(data: bytes) -> Multihash:
    return Multihash.sha3_256(data)


NOON = datetime(2020, 1, 1, 12, 0, 0, tzinfo=UTC)


def block(event, sequence_number: int = 117) -> e.MetadataBlock:
    """The reference's ``wrap_into_block``."""
    return e.MetadataBlock(system_time=NOON, prev_block_hash=sha3(b"prev"),
                           sequence_number=sequence_number, event=event)


_SLICE = e.DataSlice(logical_hash=sha3(b"logical"), physical_hash=sha3(b"physical"),
                     offset_interval=e.OffsetInterval(start=10, end=99), size=100)
_STATE = s.SourceState(source_name="push-source-1", kind="kamu/kafka-offset", value="SOME_OFFSET")


def _polling_source(read) -> e.SetPollingSource:
    return e.SetPollingSource(
        fetch=s.FetchStepFilesGlob(path="./*.csv", event_time=s.EventTimeSourceFromMetadata(),
                                   cache=s.SourceCachingForever(), order=s.SourceOrdering.BY_NAME),
        prepare=[s.PrepStepDecompress(format=s.CompressionFormat.GZIP)],
        read=read,
        preprocess=s.TransformSql(engine="spark", version="1.0.0", query="SELECT * FROM input"),
        merge=s.MergeStrategyLedger(primary_key=["a"]),
    )


def execute_transform() -> e.ExecuteTransform:
    return e.ExecuteTransform(
        query_inputs=[
            e.ExecuteTransformInput(dataset_id=seeded_dataset_id(b"input1"),
                                    prev_block_hash=sha3(b"a"), new_block_hash=sha3(b"b"),
                                    prev_offset=9, new_offset=20),
            e.ExecuteTransformInput(dataset_id=seeded_dataset_id(b"input2"),
                                    prev_block_hash=sha3(b"a"), new_block_hash=sha3(b"b")),
        ],
        prev_checkpoint=sha3(b"checkpoint"),
        prev_offset=9,
        new_data=e.DataSlice(logical_hash=sha3(b"foo"), physical_hash=sha3(b"bar"),
                             offset_interval=e.OffsetInterval(start=10, end=19), size=10),
        new_watermark=NOON,
    )


# test_serde_flatbuffers.rs, get_test_events(): each event and the SHA3-256 (hex) of the
# stored manifest of its block.
EVENTS = [
    (e.AddData(), "a93874702479f83ddff1e7a660ca78085def333c86501b0d895fa3aec79c7189"),
    (e.AddData(prev_checkpoint=sha3(b"prev"), prev_offset=9),
     "86aeb7dee0502b4886761de5e45b5111c0bc9e0fbfee02e3685487109305ef56"),
    (e.AddData(prev_checkpoint=sha3(b"prev"), prev_offset=9, new_watermark=NOON),
     "d1b412dab2a6af53f3e1b183834557bbf1c4689e2fc9b92fc0d04741ef607ecc"),
    (e.AddData(prev_checkpoint=sha3(b"prev"), prev_offset=9, new_data=_SLICE, new_watermark=NOON),
     "1fcf10cb843746c4c44e6c288e216995701aa073426fc4bebe14f1680f8ec6d1"),
    (_polling_source(s.ReadStepGeoJson(ddl_schema=["a: INT", "b: INT"])),
     "eb61498b7362d334131a8486a5ce4cc2638d7c1aa3e4da82a19cf834a77df718"),
    (_polling_source(s.ReadStepGeoJson(schema=d.DataSchema(fields=[
        d.DataField(name="a", type=d.DataTypeInt32()),
        d.DataField(name="b", type=d.DataTypeInt32()),
    ]))), "f96c90e9e9700819ba05d87f66b200a18a08404706ac62cde6d68bc350e73861"),
    (e.AddData(prev_checkpoint=sha3(b"checkpoint"), prev_offset=9, new_data=_SLICE,
               new_source_state=_STATE),
     "9326dc5daab04877a9f006ff6b1636a8fa9dcec9615b54f741a1a90091eaf694"),
    (e.AddData(prev_checkpoint=sha3(b"checkpoint"), prev_offset=9, new_data=_SLICE,
               new_source_state=_STATE,
               extra=d.ExtraAttributes.from_json({"opendatafabric.org/linkedObjects": {
                   "numObjectsNaive": 10, "sizeNaive": 100}})),
     "54f64c642cca6f67416ebe2b29e5d9414ece91f819efe97cd437fbe542c61bbb"),
    (e.SetTransform(
        inputs=[e.TransformInput(dataset_ref=str(seeded_dataset_id(b"input1")), alias="input1"),
                e.TransformInput(dataset_ref="input2", alias="input2")],
        transform=s.TransformSql(engine="spark",
                                 query="SELECT * FROM input1 UNION ALL SELECT * FROM input2"),
    ), "bb6aa1f9689b794c75affa709ae2477b209411d9ad092c2318ecd9ea94121bcc"),
    (execute_transform(), "21cab7396525e614beeafe21c05a38bf597a39a191cc14147b9c5ec32210cf82"),
]

# serde_set_data_schema (both test files): an RFC-016 schema with extra attributes.
DATA_SCHEMA = d.DataSchema(
    fields=[
        d.DataField(name="city", type=d.DataTypeString(), extra=d.ExtraAttributes.from_json(
            {"arrow.apache.org/bufferEncoding": {"kind": "View", "offsetBitWidth": 32}})),
        d.DataField(name="population", type=d.DataTypeUInt64()),
        d.DataField(name="census", type=d.DataTypeOption(inner=d.DataTypeString()),
                    extra=d.ExtraAttributes.from_json({"opendatafabric.org/type": {
                        "kind": "ObjectLink", "linkType": {"kind": "Multihash"}}})),
        d.DataField(name="links", type=d.DataTypeList(item_type=d.DataTypeString())),
    ],
    extra=d.ExtraAttributes.from_json({"kamu.dev/archetype": "Collection"}),
)
DATA_SCHEMA_HASH = "80865248519d55fa04598e24ba42884728efe70956e640dca4df5ec8043c69ca"

# serde_set_data_schema_legacy: the Arrow IPC schema {a: Int64 not null, b: Boolean not null}
# as the reference's YAML vector spells it.
RAW_ARROW_SCHEMA = d.Base64Bytes.parse(
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABi"
    "AAAAEAAUABAAAAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA=")
RAW_ARROW_SCHEMA_HASH = "a7e79d088ca7bac689f12d71ae64b93e7bab62a7db2fec83ea89e9bf90dd89ed"
