"""``did:odf`` dataset identities (ODF 0.39; the reference's ``DidOdf`` / ``DatasetID``).

Invariants:

- An identity is an Ed25519 public key (32 bytes). Its bytes are the multicodec
  ``ed25519-pub`` varint (``ed 01``) then the key; that is how a ``Seed`` stores it.
- ``did:odf:`` is written with multibase base16 (``did:odf:fed01<key hex>``) and read in
  base16 or base58btc (``did:odf:z6Mk...``, the ``did:key`` spelling of the same key).
- ``did_key`` is the same key under the W3C ``did:key`` method (base58btc).
"""
from __future__ import annotations

from dataclasses import dataclass

from .multiformats import ED25519_PUB, MultiformatError, base58_encode, multibase_decode, read_varint, varint

PREFIX = "did:odf:"
KEY_LEN = 32


class InvalidDid(MultiformatError):
    """A ``did:odf`` string or its bytes that do not decode to an Ed25519 key."""


@dataclass(frozen=True)
class DatasetId:
    """A dataset's ``did:odf`` identity: an Ed25519 public key."""

    public_key: bytes

    def __post_init__(self):
        if len(self.public_key) != KEY_LEN:
            raise InvalidDid(f"an Ed25519 public key is {KEY_LEN} bytes, not {len(self.public_key)}")

    @staticmethod
    def from_public_key(key) -> DatasetId:
        """The identity of a ``cryptography`` Ed25519 public (or private) key."""
        from cryptography.hazmat.primitives import serialization

        public = key.public_key() if hasattr(key, "public_key") else key
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return DatasetId(raw)

    def to_bytes(self) -> bytes:
        return varint(ED25519_PUB) + self.public_key

    @staticmethod
    def from_bytes(buf: bytes) -> DatasetId:
        try:
            code, pos = read_varint(buf)
        except MultiformatError as e:
            raise InvalidDid(f"not a DID: {e}") from None
        if code != ED25519_PUB:
            raise InvalidDid(f"DID key type 0x{code:x} is not ed25519-pub (0xed): {buf.hex()}")
        return DatasetId(bytes(buf[pos:]))

    @staticmethod
    def parse(text: str) -> DatasetId:
        """A ``did:odf:<multibase>`` string (base16 ``f`` or base58btc ``z``)."""
        if not text.startswith(PREFIX):
            raise InvalidDid(f"{text!r} is not a did:odf identity (it starts with {PREFIX!r})")
        try:
            return DatasetId.from_bytes(multibase_decode(text[len(PREFIX):]))
        except MultiformatError as e:
            raise InvalidDid(f"{text!r} is not a valid did:odf identity: {e}") from None

    def multibase(self) -> str:
        """The identity without ``did:odf:``, in base16 (as the reference writes it)."""
        return "f" + self.to_bytes().hex()

    def did_key(self) -> str:
        """The same key as a W3C ``did:key`` (base58btc)."""
        return "did:key:z" + base58_encode(self.to_bytes())

    def __str__(self) -> str:
        return PREFIX + self.multibase()
