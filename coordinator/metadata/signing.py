"""Ed25519 signatures over block hashes, kept beside each block.

A signature file (``meta/signatures/<hash>``) is a small YAML document holding the algorithm,
the signer's raw public key and the signature of the 32-byte block hash, so a reader can tell
a block signed by a trusted key from one signed by an unknown key or not signed at all.
"""
from __future__ import annotations

import binascii
import enum
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import Invalid

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# cryptography is imported where a key is used: checking a signature needs only the Ed25519
# primitive, and commands that read no chain (coord --help) need none of it. YAML is imported
# where a signature is written, or read in another spelling than coord writes: a chain's
# readers (coord list, status, log) need none of it.

ALGORITHM = "ed25519"
_AS_WRITTEN = re.compile(
    rb"algorithm: ed25519\npublicKey: ([0-9a-f]{64})\nsignature: ([0-9a-f]{128})\n")


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
        import yaml

        doc = {"algorithm": ALGORITHM, "publicKey": self.public_key.hex(), "signature": self.signature.hex()}
        return yaml.safe_dump(doc, sort_keys=False).encode()

    @staticmethod
    def from_bytes(data: bytes) -> Signature:
        # Read for every block of a chain walk: the exact bytes ``to_bytes`` writes are taken
        # apart directly (YAML's loader costs more than the Ed25519 check), any other
        # spelling of the document goes through YAML.
        written = _AS_WRITTEN.fullmatch(data)
        if written is not None:
            return Signature(bytes.fromhex(written[1].decode()), bytes.fromhex(written[2].decode()))
        import yaml

        try:
            doc = yaml.load(data, Loader=yaml.CSafeLoader)
        except yaml.YAMLError as e:
            raise ValueError(f"not a signature document: {e}") from None
        if not isinstance(doc, dict) or doc.get("algorithm") != ALGORITHM:
            raise ValueError("not an ed25519 signature document")
        return Signature(bytes.fromhex(doc["publicKey"]), bytes.fromhex(doc["signature"]))


class SigningKey:
    """A workspace's Ed25519 key. One loaded from its file (``load``) is made into the
    primitive's key on first use: a command that may sign, but finds nothing to, does not
    import the primitive (a tenth of a metadata command's start)."""

    def __init__(self, private: Ed25519PrivateKey | None = None, *, seed: bytes | None = None):
        assert (private is None) != (seed is None), "a key, or the seed to make it from"
        self._key, self._seed = private, seed

    @property
    def _private(self) -> Ed25519PrivateKey:
        if self._key is None:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

            assert self._seed is not None
            self._key = Ed25519PrivateKey.from_private_bytes(self._seed)
        return self._key

    @functools.cached_property
    def public_key(self) -> bytes:
        return self._private.public_key().public_bytes_raw()

    @staticmethod
    def generate(path: Path) -> SigningKey:
        """Create a new key file readable by its owner only (0600 from the first byte)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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
        return SigningKey.from_pem(read_key_file(path), path)

    @staticmethod
    def from_pem(pem: bytes, path: Path) -> SigningKey:
        """The key of a key file's bytes (``read_key_file``; ``path`` names it in errors)."""
        seed = _pkcs8_ed25519_seed(pem)
        if seed is not None:  # what generate() writes: no need for the PEM/PKCS#8 parsers
            return SigningKey(seed=seed)
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise Invalid(f"{path} is not an Ed25519 key")
        return SigningKey(key)

    def sign(self, block_hash: bytes) -> Signature:
        return Signature(self.public_key, self._private.sign(block_hash))

    def derive(self, purpose: str) -> Ed25519PrivateKey:
        """A second Ed25519 key, the same for the same key and ``purpose``, different for
        another: its seed is the SHA3-256 of a domain tag, this key's seed and ``purpose``.
        Whoever holds this key can make it again; its public key reveals nothing of this one."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        seed = self._private.private_bytes(serialization.Encoding.Raw,
                                           serialization.PrivateFormat.Raw,
                                           serialization.NoEncryption())
        material = b"coord derived ed25519 key v1\0" + seed + purpose.encode()
        return Ed25519PrivateKey.from_private_bytes(hashlib.sha3_256(material).digest())


def read_key_file(path: Path) -> bytes:
    """A signing key file's bytes, refused when others may read it."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise PermissionError(f"signing key {path} is readable by others (mode {mode:o}); chmod 600 it")
    return path.read_bytes()


# An unencrypted PKCS#8 Ed25519 key (RFC 8410) is this DER prefix and the 32-byte seed.
_PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")


def _pkcs8_ed25519_seed(pem: bytes) -> bytes | None:
    """The seed of a PEM "PRIVATE KEY" in the exact form generate() writes, else None (the
    cryptography parsers then read it; importing them costs a tenth of a command's start)."""
    lines = pem.strip().splitlines()
    if len(lines) < 3 or (lines[0], lines[-1]) != (b"-----BEGIN PRIVATE KEY-----",
                                                     b"-----END PRIVATE KEY-----"):
        return None
    try:
        der = binascii.a2b_base64(b"".join(lines[1:-1]))
    except binascii.Error:
        return None
    if len(der) != len(_PKCS8_ED25519) + 32 or not der.startswith(_PKCS8_ED25519):
        return None
    return der[len(_PKCS8_ED25519):]


def parse_public_key(text: str) -> bytes:
    """A public key as written in signature files and config (64 hex digits), checked."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = bytes.fromhex(text)
        Ed25519PublicKey.from_public_bytes(key)
    except ValueError:
        raise Invalid(f"not an Ed25519 public key: {text!r} (expected 64 hex digits, as in "
                         "'coord trust list' or a block's signature file)") from None
    return key


class VerifiedSignatures(Protocol):
    """Signatures found valid before, as ``verified_fact``s.

    Whether a signature is valid depends on nothing but the block hash, the public key and
    the signature, so a check once passed can be remembered and need not be repeated: a
    signature file replaced since is another triple and is checked anew.
    """

    def __contains__(self, fact: bytes) -> bool: ...

    def add(self, fact: bytes) -> None: ...


def verified_fact(block_hash: bytes, sig: Signature) -> bytes:
    """What ``VerifiedSignatures`` holds of a valid signature: SHA3-256 of the triple."""
    return hashlib.sha3_256(block_hash + sig.public_key + sig.signature).digest()


def check_signature(
    block_hash: bytes, data: bytes | None, trusted: set[bytes],
    verified: VerifiedSignatures | None = None,
) -> tuple[SignatureStatus, bytes | None]:
    """The signature's status and the signer's public key (None when unsigned or invalid);
    ``verified``: signatures found valid before, taken as valid without the Ed25519 check
    (and added to when a check passes)."""
    if data is None:
        return SignatureStatus.UNSIGNED, None
    try:
        sig = Signature.from_bytes(data)
    except (ValueError, KeyError, TypeError):  # from_bytes: also a document YAML cannot read
        return SignatureStatus.INVALID, None
    fact = verified_fact(block_hash, sig)
    if verified is None or fact not in verified:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(sig.public_key).verify(sig.signature, block_hash)
        except (InvalidSignature, ValueError):
            return SignatureStatus.INVALID, None
        if verified is not None:
            verified.add(fact)
    status = SignatureStatus.TRUSTED if sig.public_key in trusted else SignatureStatus.UNKNOWN_KEY
    return status, sig.public_key
