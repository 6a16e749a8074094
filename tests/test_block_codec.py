"""Block serialization and hashing: the spec's procedure, byte for byte."""
from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given, settings

from coordinator.metadata import objects as o
from coordinator.metadata.block_hash import check_stored, seal
from coordinator.metadata.flatbuffers_codec import BlockFormatError, decode_block, encode_block
from coordinator.metadata.timefmt import parse_timestamp
from coordinator.metadata.yaml_codec import dump_yaml, from_dict, load_yaml, manifest_to_dict

from .metadata_strategies import blocks

CONFORMANCE_HASH = "d8be7cde15b4507b98226444a8e75c3459be33de5aa2abf59974ed8f9a71faea"


def conformance_block() -> o.MetadataBlock:
    """The root block of the spec's hashing example, published with ODF 0.18-era implementations."""
    return o.MetadataBlock(
        prev_block_hash=bytes([0x0B]) * 32,
        system_time=parse_timestamp("2020-01-01T12:00:00Z"),
        vocab=o.DatasetVocabulary(event_time_column="date"),
        source=o.DatasetSourceRoot(
            fetch=o.FetchStepFilesGlob(
                path="./*.csv",
                event_time=o.EventTimeSourceFromMetadata(),
                cache=o.SourceCachingForever(),
                order=o.SourceOrdering.BY_NAME,
            ),
            prepare=[o.PrepStepDecompress(format=o.CompressionFormat.GZIP)],
            read=o.ReadStepGeoJson(schema=["a: INT", "b: INT"]),
            preprocess=o.TransformSql(engine="spark", version="1.0.0", query="SELECT * FROM input"),
            merge=o.MergeStrategyLedger(primary_key=["a"]),
        ),
    )


def test_conformance_vector_hash_is_reproduced():
    block, _ = seal(conformance_block())
    assert block.block_hash.hex() == CONFORMANCE_HASH


def test_hash_covers_every_byte_but_the_last_32():
    _, data = seal(conformance_block())
    assert hashlib.sha3_256(data[:-32]).hexdigest() == CONFORMANCE_HASH
    assert data[-32:].hex() == CONFORMANCE_HASH


def test_stored_bytes_decode_to_the_same_block():
    block, data = seal(conformance_block())
    assert decode_block(data) == block


def test_conformance_vector_from_yaml_manifest(tmp_path):
    doc = manifest_to_dict(conformance_block())
    reloaded = from_dict(o.MetadataBlock, load_yaml(dump_yaml(doc))["content"])
    assert seal(reloaded)[0].block_hash.hex() == CONFORMANCE_HASH


def test_a_flipped_byte_is_detected():
    block, data = seal(conformance_block())
    broken = bytearray(data)
    broken[40] ^= 1
    with pytest.raises(BlockFormatError, match="content hash does not match its name"):
        check_stored(bytes(broken), block.block_hash)


def test_hash_must_be_the_last_32_bytes():
    block, data = seal(conformance_block())
    with pytest.raises(BlockFormatError):
        check_stored(data + bytes(8), block.block_hash)


def test_bytes_that_hash_to_their_name_but_are_no_block_are_refused_when_parsed():
    content = b"\xff" * 600
    name = hashlib.sha3_256(content).digest()
    with pytest.raises(BlockFormatError, match="not a valid MetadataBlock"):
        check_stored(content + name, name)


def with_source(block: o.MetadataBlock, **changes) -> o.MetadataBlock:
    return dataclasses.replace(block, source=dataclasses.replace(block.source, **changes))


def test_empty_prepare_list_differs_from_no_prepare():
    with_empty = with_source(conformance_block(), prepare=[])
    without = with_source(conformance_block(), prepare=None)
    assert encode_block(with_empty) != encode_block(without)


def test_gzip_format_is_omitted_as_the_schema_default():
    gz = o.PrepStepDecompress(format=o.CompressionFormat.GZIP)
    zp = o.PrepStepDecompress(format=o.CompressionFormat.ZIP)
    b1, b2 = with_source(conformance_block(), prepare=[gz]), with_source(conformance_block(), prepare=[zp])
    assert len(encode_block(b2)) > len(encode_block(b1))
    assert decode_block(encode_block(b1)).source.prepare == [gz]


def test_extension_fields_absent_leave_the_018_hash_unchanged():
    block = dataclasses.replace(conformance_block(), engine=None)
    assert seal(block)[0].block_hash.hex() == CONFORMANCE_HASH
    block = dataclasses.replace(block, engine=o.EngineIdentity(runtime="sandbox", version="0.1.0"))
    assert seal(block)[0].block_hash.hex() != CONFORMANCE_HASH


def test_parquet_read_step_is_union_tag_5_as_in_later_odf():
    assert o.UNIONS["ReadStep"].index(o.ReadStepParquet) + 1 == 5
    block = with_source(conformance_block(), read=o.ReadStepParquet(schema=["a INT"]))
    assert decode_block(seal(block)[1]).source.read == o.ReadStepParquet(schema=["a INT"])


@settings(max_examples=300, deadline=None)
@given(blocks)
def test_flatbuffers_round_trip_is_byte_stable(block):
    _, data = seal(block)
    assert seal(decode_block(data))[1] == data


@settings(max_examples=300, deadline=None)
@given(blocks)
def test_yaml_block_yaml_block_round_trip_is_byte_stable(block):
    _, data = seal(block)
    text = dump_yaml(manifest_to_dict(decode_block(data)))
    again = from_dict(o.MetadataBlock, load_yaml(text)["content"])
    _, data2 = seal(again)
    assert data2 == data
    assert dump_yaml(manifest_to_dict(decode_block(data2))) == text
