"""Multiformats as ODF uses them: unsigned varints, multihashes, multibase base16 and base58btc.

Invariants:

- A multihash is ``varint(code) varint(length) digest``; its text form is multibase base16:
  ``f`` then the lowercase hex of those bytes (a SHA3-256 one reads ``f1620...``).
- Parsing is strict: an unknown multibase prefix, a length that is not the digest's, a
  non-minimal varint or trailing bytes are a ``MultiformatError`` naming the text or bytes.
- Decoding reads base16 (``f``, either case of hex) and base58btc (``z``); encoding writes
  base16, the form ODF writes every hash and ``did:odf`` in.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import Invalid

SHA3_256 = 0x16  # multicodec sha3-256
ARROW0_SHA3_256 = 0x300016  # ODF's private-use code: arrow-digest RecordDigestV0 over SHA3-256
ED25519_PUB = 0xED  # multicodec ed25519-pub
ODF_METADATA_BLOCK = 0x400000  # ODF's private-use code: the manifest kind of a MetadataBlock

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58)}


class MultiformatError(Invalid, ValueError):
    """A multihash, multibase string or varint that does not decode."""


def varint(n: int) -> bytes:
    """``n`` as an unsigned LEB128 varint (the multiformats varint)."""
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``; at most 9 bytes, minimal."""
    value = shift = 0
    for i in range(pos, min(len(buf), pos + 9)):
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if byte == 0 and i > pos:  # a trailing zero group: the same number written longer
                raise MultiformatError(f"non-minimal varint in {buf.hex()}")
            return value, i + 1
        shift += 7
    raise MultiformatError(f"unterminated varint in {buf.hex()}")


def multibase_decode(text: str) -> bytes:
    """The bytes of a multibase string: ``f`` (base16) or ``z`` (base58btc)."""
    prefix, body = text[:1], text[1:]
    decoders = {"f": (_base16_decode, "base16"), "z": (base58_decode, "base58btc")}
    if prefix not in decoders:
        raise MultiformatError(f"{text!r}: unsupported multibase prefix (expected f or z)")
    decode, name = decoders[prefix]
    try:
        return decode(body)
    except ValueError:
        raise MultiformatError(f"{text!r}: not valid multibase {name}") from None


def _base16_decode(body: str) -> bytes:
    # bytes.fromhex skips whitespace: a head or name with a stray newline is not the hash.
    if not _BASE16.fullmatch(body):
        raise ValueError(body)
    return bytes.fromhex(body)


_BASE16 = re.compile(r"(?:[0-9a-fA-F]{2})*")


def base58_encode(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    zeros = len(data) - len(data.lstrip(b"\0"))  # each leading zero byte is a leading '1'
    return "1" * zeros + out


def base58_decode(text: str) -> bytes:
    n = 0
    for c in text:
        if c not in _B58_INDEX:
            raise ValueError(f"{c!r} is not a base58btc digit")
        n = n * 58 + _B58_INDEX[c]
    zeros = len(text) - len(text.lstrip("1"))
    return b"\0" * zeros + (n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b"")


@dataclass(frozen=True)
class Multihash:
    """A self-describing hash: the multicodec of its function and the digest."""

    code: int
    digest: bytes

    @staticmethod
    def sha3_256(data: bytes) -> Multihash:
        return Multihash(SHA3_256, hashlib.sha3_256(data).digest())

    def to_bytes(self) -> bytes:
        return varint(self.code) + varint(len(self.digest)) + self.digest

    @staticmethod
    def from_bytes(buf: bytes) -> Multihash:
        code, pos = read_varint(buf)
        length, pos = read_varint(buf, pos)
        if len(buf) - pos != length:
            raise MultiformatError(f"multihash {buf.hex()}: says {length} digest bytes, "
                                   f"holds {len(buf) - pos}")
        return Multihash(code, bytes(buf[pos:]))

    @staticmethod
    def parse(text: str) -> Multihash:
        """A multihash from its multibase text (``f1620...``)."""
        return Multihash.from_bytes(multibase_decode(text))

    def __str__(self) -> str:
        return "f" + self.to_bytes().hex()
