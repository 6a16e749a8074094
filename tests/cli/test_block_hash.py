"""``coord block hash FILE`` takes a block in any form: a YAML manifest of ODF 0.18 or of the
current ODF, or a stored FlatBuffers block of either version; the reference's vectors (kamu-cli
v0.265.0 test_serde_yaml.rs and test_serde_flatbuffers.rs) through the real CLI."""
from __future__ import annotations

import hashlib
import json

import pytest

from coordinator.metadata.block_hash import seal
from coordinator.metadata.flatbuffers_codec import encode_table
from coordinator.metadata.multiformats import ODF_METADATA_BLOCK
from coordinator.metadata.odf39 import codec
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.yaml_codec import dump_yaml, manifest_to_dict
from tests.metadata.odf39_vectors import DATA_SCHEMA, DATA_SCHEMA_HASH, EVENTS, block
from tests.metadata.test_block_codec import CONFORMANCE_HASH, conformance_block
from tests.metadata.test_odf39_yaml import EXECUTE_TRANSFORM_BLOCK, SET_DATA_SCHEMA_BLOCK
from tests.support.cli import MANIFESTS, coord

# the reference's YAML vectors, at the sequence number its FlatBuffers vectors hash them with
YAML_VECTORS = [
    (EXECUTE_TRANSFORM_BLOCK.replace("sequenceNumber: 127", "sequenceNumber: 117"), EVENTS[-1][1]),
    (SET_DATA_SCHEMA_BLOCK.replace("sequenceNumber: 123", "sequenceNumber: 117"), DATA_SCHEMA_HASH),
]


def hash_of(tmp_path, content: bytes | str, *options: str):
    path = tmp_path / "block"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return coord("block", "hash", str(path), *options, cwd=tmp_path, check=False)


@pytest.mark.parametrize(("manifest", "expected"), YAML_VECTORS, ids=[h[:12] for _, h in YAML_VECTORS])
def test_a_current_yaml_block_hashes_as_the_reference_hashes_its_flatbuffers(tmp_path, manifest, expected):
    assert hash_of(tmp_path, manifest).stdout == f"f1620{expected}\n"


def test_the_text_output_notes_the_form_on_stderr(tmp_path):
    done = hash_of(tmp_path, YAML_VECTORS[0][0])
    assert done.stderr == f"{tmp_path / 'block'}: ODF 0.39 MetadataBlock, a YAML manifest, hashed as a " \
                          "version-3 manifest\n"


@pytest.mark.parametrize(("event", "expected"), EVENTS[:4])
def test_a_stored_current_block_hashes_as_its_bytes(tmp_path, event, expected):
    found = json.loads(hash_of(tmp_path, codec.encode_block(block(event)), "-o", "json").stdout)
    assert found == {"hash": f"f1620{expected}", "odf": "0.39", "encoding": "flatbuffers",
                     "manifestVersion": 3}


def test_a_stored_version_2_block_is_hashed_as_stored_not_re_encoded(tmp_path):
    stored = encode_table(codec.Manifest(kind=ODF_METADATA_BLOCK, version=2,
                                         content=encode_table(block(e.SetDataSchema(schema=DATA_SCHEMA)))))
    found = json.loads(hash_of(tmp_path, stored, "-o", "json").stdout)
    assert found["hash"] == f"f1620{hashlib.sha3_256(stored).hexdigest()}" != f"f1620{DATA_SCHEMA_HASH}"
    assert found["manifestVersion"] == 2


def test_a_stored_0_18_block_hashes_as_the_spec_says(tmp_path):
    found = json.loads(hash_of(tmp_path, seal(conformance_block()).stored, "-o", "json").stdout)
    assert found == {"hash": CONFORMANCE_HASH, "odf": "0.18", "encoding": "flatbuffers",
                     "manifestVersion": None}


def test_a_0_18_yaml_block_says_its_form_in_json(tmp_path):
    manifest = dump_yaml(manifest_to_dict(conformance_block()))
    found = json.loads(hash_of(tmp_path, manifest, "-o", "json").stdout)
    assert found == {"hash": CONFORMANCE_HASH, "odf": "0.18", "encoding": "yaml", "manifestVersion": None}


def test_a_stored_0_18_block_whose_block_hash_field_disagrees_is_refused(tmp_path):
    stored = bytearray(seal(conformance_block()).stored)
    stored[-1] ^= 1
    done = hash_of(tmp_path, bytes(stored))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"coord: error: {tmp_path / 'block'}: neither a stored ODF 0.39 block (")
    assert done.stderr.endswith("nor an ODF 0.18 one (blockHash does not match the block's contents)\n")


def test_bytes_that_are_no_block_are_refused_in_one_line(tmp_path):
    done = hash_of(tmp_path, b"\0garbage" * 8)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "neither a stored ODF 0.39 block" in done.stderr


@pytest.mark.parametrize("manifest", [MANIFESTS / "com.example.orders.yaml",
                                      MANIFESTS / "reference" / "leaderboard" / "player-scores.yaml"])
def test_a_dataset_snapshot_of_either_form_is_not_a_block(tmp_path, manifest):
    done = hash_of(tmp_path, manifest.read_text())
    assert done.returncode == 1
    assert done.stderr == (f"coord: error: {tmp_path / 'block'}: kind: holds a DatasetSnapshot, not a "
                           "MetadataBlock (coord add takes DatasetSnapshot manifests)\n")


def test_a_current_block_manifest_of_an_older_version_is_refused_by_number(tmp_path):
    done = hash_of(tmp_path, YAML_VECTORS[0][0].replace("version: 3", "version: 1"))
    assert done.returncode == 1 and "MetadataBlock manifest version 1 is not supported" in done.stderr
