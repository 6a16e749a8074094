"""Block hashing: SHA3-256 over the FlatBuffers bytes without the blockHash vector's contents.

``blockHash`` is the first field created, so its 32 bytes are the last 32 bytes of the
buffer; the digest is written there. Stored blocks are hashed as stored, never re-encoded.

A stored block is checked against the name it is stored under *before* any of it is
decoded: the hash needs only the byte layout (content, then 32 hash bytes), so bytes from
someone else reach the FlatBuffers decoder only once their hash proves them a block that
was sealed under that name.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import NamedTuple

from .flatbuffers_codec import BlockFormatError, block_hash_position, encode_block
from .objects import MetadataBlock

HASH_LEN = 32


class Sealed(NamedTuple):
    block: MetadataBlock  # with its blockHash set
    stored: bytes  # the FlatBuffers bytes, digest last

    @property
    def hash(self) -> bytes:
        return self.stored[-HASH_LEN:]


def seal(block: MetadataBlock) -> Sealed:
    """Serialize a block, compute its hash and return (block with blockHash, stored bytes)."""
    buf = bytearray(encode_block(dataclasses.replace(block, block_hash=bytes(HASH_LEN))))
    digest = hashlib.sha3_256(buf[:-HASH_LEN]).digest()
    buf[-HASH_LEN:] = digest
    return Sealed(dataclasses.replace(block, block_hash=digest), bytes(buf))


def compute_hash(block: MetadataBlock) -> bytes:
    return seal(block).hash


def check_stored(buf: bytes, name: bytes) -> None:
    """Check the bytes stored under ``name`` are that block, hashing before decoding.

    Raises BlockFormatError saying what did not match.
    """
    if len(buf) <= HASH_LEN or hashlib.sha3_256(buf[:-HASH_LEN]).digest() != name:
        raise BlockFormatError("content hash does not match its name")
    if buf[-HASH_LEN:] != name:
        raise BlockFormatError("blockHash does not match the block's contents")
    # Only now, with the hash proving who sealed these bytes, is the buffer parsed.
    start, length = block_hash_position(buf)
    if length != HASH_LEN or start != len(buf) - HASH_LEN:
        raise BlockFormatError("blockHash is not the last 32 bytes of the block")
