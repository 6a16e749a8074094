"""Ed25519 signatures over block hashes, kept beside each block.

A signature file (``meta/signatures/<hash>``) is a small YAML document holding the algorithm,
the signer's raw public key and the signature of the 32-byte block hash, so a reader can tell
a block signed by a trusted key from one signed by an unknown key or not signed at all.
"""
from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import CoordError

ALGORITHM = "ed25519"


class SignatureStatus(enum.Enum):
    TRUSTED = "signed by a trusted key"
    UNKNOWN_KEY = "signed by an unknown key"
    UNSIGNED = "unsigned"
    INVALID = "signature does not match the block"


@dataclass(frozen=True)
class Signature:
    public_key: bytes  # raw 32 bytes
    signature: bytes  # 64 bytes

    def to_bytes(self) -> bytes:
        doc = {"algorithm": ALGORITHM, "publicKey": self.public_key.hex(), "signature": self.signature.hex()}
        return yaml.safe_dump(doc, sort_keys=False).encode()

    @staticmethod
    def from_bytes(data: bytes) -> Signature:
        doc = yaml.load(data, Loader=yaml.CSafeLoader)  # read for every block of a chain walk
        if not isinstance(doc, dict) or doc.get("algorithm") != ALGORITHM:
            raise ValueError("not an ed25519 signature document")
        return Signature(bytes.fromhex(doc["publicKey"]), bytes.fromhex(doc["signature"]))


class SigningKey:
    def __init__(self, private: Ed25519PrivateKey):
        self._private = private
        self.public_key = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @staticmethod
    def generate(path: Path) -> SigningKey:
        """Create a new key file readable by its owner only (0600 from the first byte)."""
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        return SigningKey(key)

    @staticmethod
    def load(path: Path) -> SigningKey:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise PermissionError(f"signing key {path} is readable by others (mode {mode:o}); chmod 600 it")
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise CoordError(f"{path} is not an Ed25519 key")
        return SigningKey(key)

    def sign(self, block_hash: bytes) -> Signature:
        return Signature(self.public_key, self._private.sign(block_hash))


def check_signature(block_hash: bytes, data: bytes | None, trusted: set[bytes]) -> SignatureStatus:
    if data is None:
        return SignatureStatus.UNSIGNED
    try:
        sig = Signature.from_bytes(data)
        Ed25519PublicKey.from_public_bytes(sig.public_key).verify(sig.signature, block_hash)
    except (InvalidSignature, ValueError, KeyError, TypeError, yaml.YAMLError):
        return SignatureStatus.INVALID
    return SignatureStatus.TRUSTED if sig.public_key in trusted else SignatureStatus.UNKNOWN_KEY
