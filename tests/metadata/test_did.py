"""``did:odf`` identities: the reference's vectors (kamu-cli v0.265.0 test_dataset_id.rs,
test_dataset_identity.rs) and identities derived from our Ed25519 keys."""
from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coordinator.metadata.did import DatasetId, InvalidDid
from tests.metadata.odf39_vectors import seeded_dataset_id

MULTIHASH_ID = "fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"


def test_seeded_id_is_written_in_base16_as_the_reference_writes_it():
    did = seeded_dataset_id(b"multihash")
    assert did.multibase() == MULTIHASH_ID
    assert str(did) == "did:odf:" + MULTIHASH_ID


def test_did_string_parses_and_formats_back_and_maps_to_did_key():
    text = "did:odf:fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"
    did = DatasetId.parse(text)
    assert str(did) == text
    assert did.did_key() == "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"


def test_base58_did_reads_as_the_same_identity():
    assert (DatasetId.parse("did:odf:z6MkmgVreHBu2ABaD59Jq1J2JneXwzpsUWwEWXS4kLhjb4V4")
            == seeded_dataset_id(b"key"))


def test_identities_differ_when_their_keys_do():
    a = DatasetId.parse("did:odf:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK")
    assert a == DatasetId.parse("did:odf:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK")
    assert a != DatasetId.parse("did:odf:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doL")


def test_bytes_are_the_ed25519_pub_multicodec_then_the_key():
    did = seeded_dataset_id(b"multihash")
    assert did.to_bytes() == bytes.fromhex(MULTIHASH_ID[1:])
    assert DatasetId.from_bytes(did.to_bytes()) == did


def test_identity_of_an_ed25519_key_is_its_public_key():
    key = Ed25519PrivateKey.generate()
    did = DatasetId.from_public_key(key)
    assert did == DatasetId.from_public_key(key.public_key())
    assert DatasetId.parse(str(did)) == did
    assert did.did_key().startswith("did:key:z6Mk")  # every Ed25519 did:key does


@pytest.mark.parametrize(("text", "problem"), [
    ("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "not a did:odf"),
    ("did:odf:x" + MULTIHASH_ID[1:], "multibase prefix"),
    ("did:odf:f" + "e701" + "00" * 32, "not ed25519-pub"),
    ("did:odf:" + MULTIHASH_ID[:-2], "32 bytes"),
])
def test_malformed_identities_are_refused_saying_why(text, problem):
    with pytest.raises(InvalidDid, match=problem):
        DatasetId.parse(text)
