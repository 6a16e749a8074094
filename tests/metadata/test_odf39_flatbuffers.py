"""ODF 0.39 blocks in FlatBuffers: the reference's serializer-stability vectors (kamu-cli
v0.265.0 test_serde_flatbuffers.rs), round trips, the manifest envelope and the block hash."""
from __future__ import annotations

import hashlib
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from coordinator.metadata.flatbuffers_codec import BlockFormatError, encode_table
from coordinator.metadata.multiformats import ODF_METADATA_BLOCK, Multihash
from coordinator.metadata.odf39 import codec
from coordinator.metadata.odf39 import events as e
from tests.metadata.odf39_vectors import (
    DATA_SCHEMA,
    DATA_SCHEMA_HASH,
    EVENTS,
    RAW_ARROW_SCHEMA,
    RAW_ARROW_SCHEMA_HASH,
    block,
    seeded_dataset_id,
)
from tests.metadata.strategies import blocks39


@pytest.mark.parametrize(("case", "event", "expected"), [(i, ev, h) for i, (ev, h) in enumerate(EVENTS)])
def test_block_bytes_hash_as_the_reference_pins_them(case, event, expected):
    assert hashlib.sha3_256(codec.encode_block(block(event))).hexdigest() == expected


@pytest.mark.parametrize("event", [ev for ev, _ in EVENTS])
def test_block_round_trips_through_its_manifest(event):
    assert codec.decode_block(codec.encode_block(block(event))) == block(event)


def test_data_schema_block_hashes_as_the_reference_pins_it():
    b = block(e.SetDataSchema(schema=DATA_SCHEMA))
    stored = codec.encode_block(b)
    assert hashlib.sha3_256(stored).hexdigest() == DATA_SCHEMA_HASH
    assert codec.decode_block(stored) == b


def test_legacy_raw_arrow_schema_block_hashes_as_the_reference_pins_it():
    b = block(e.SetDataSchema(raw_arrow_schema=RAW_ARROW_SCHEMA))
    stored = codec.encode_block(b)
    assert hashlib.sha3_256(stored).hexdigest() == RAW_ARROW_SCHEMA_HASH
    assert codec.decode_block(stored) == b


def test_block_hash_is_the_sha3_multihash_of_the_stored_bytes_in_base16():
    sealed = codec.seal(block(EVENTS[0][0]))
    assert str(sealed.hash) == "f1620" + EVENTS[0][1]


def test_seed_of_a_root_omits_its_kind_and_round_trips():
    seed = e.Seed(dataset_id=seeded_dataset_id(b"multihash"), dataset_kind=e.DatasetKind.ROOT)
    root, derivative = (codec.encode_block(block(ev, 0)) for ev in
                        (seed, e.Seed(dataset_id=seed.dataset_id, dataset_kind=e.DatasetKind.DERIVATIVE)))
    assert len(root) < len(derivative)  # Root is the schema default: not written
    assert codec.decode_block(root).event == seed
    assert codec.decode_block(root).sequence_number == 0


def _manifest(version: int, kind: int = ODF_METADATA_BLOCK) -> bytes:
    content = encode_table(block(EVENTS[1][0]))
    return encode_table(codec.Manifest(kind=kind, version=version, content=content))


def test_version_2_manifests_are_read():
    assert codec.decode_block(_manifest(2)) == block(EVENTS[1][0])


@pytest.mark.parametrize("version", [1, 4])
def test_other_manifest_versions_are_refused_by_number(version):
    with pytest.raises(BlockFormatError, match=f"version {version} is not supported"):
        codec.decode_block(_manifest(version))


def test_a_manifest_of_another_kind_is_refused():
    with pytest.raises(BlockFormatError, match="is not a MetadataBlock"):
        codec.decode_block(_manifest(3, kind=0x123))


def test_stored_block_is_checked_against_its_name_before_decoding():
    stored = codec.encode_block(block(EVENTS[3][0]))
    name = codec.block_hash(stored)
    assert codec.check_stored(stored, name) == block(EVENTS[3][0])
    garbled = stored[:-1] + bytes([stored[-1] ^ 1])
    with pytest.raises(BlockFormatError, match="hash to"):
        codec.check_stored(garbled, name)
    with pytest.raises(BlockFormatError, match="not a SHA3-256"):
        codec.check_stored(stored, Multihash(0x300016, name.digest))


def test_reading_a_block_does_not_import_the_flatbuffers_runtime_or_numpy():
    stored = codec.encode_block(block(EVENTS[9][0]))
    script = ("import sys; from coordinator.metadata.odf39 import codec; "
              f"codec.decode_block(bytes.fromhex('{stored.hex()}')); "
              "print(sorted(m for m in ('numpy', 'flatbuffers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(blocks39)
def test_any_block_round_trips_through_its_manifest(b):
    assert codec.decode_block(codec.encode_block(b)) == b


@pytest.mark.parametrize("cut", [0, 4, 16, 40, -8])
def test_a_truncated_manifest_is_a_block_format_error(cut):
    stored = codec.encode_block(block(EVENTS[9][0]))
    with pytest.raises(BlockFormatError):
        codec.decode_block(stored[:cut])


def test_an_event_tag_of_a_later_version_is_refused_by_number():
    content = bytearray(encode_table(block(e.DisablePollingSource())))
    # the event's type tag: MetadataBlock field 3, found through the root table's vtable
    (table,) = struct.unpack_from("<I", content, 0)
    (back,) = struct.unpack_from("<i", content, table)
    (at,) = struct.unpack_from("<H", content, table - back + 4 + 2 * 3)
    assert content[table + at] == 13  # DisablePollingSource
    content[table + at] = 14
    stored = encode_table(codec.Manifest(kind=ODF_METADATA_BLOCK, version=3, content=bytes(content)))
    with pytest.raises(BlockFormatError, match="unknown MetadataEvent type tag 14"):
        codec.decode_block(stored)
