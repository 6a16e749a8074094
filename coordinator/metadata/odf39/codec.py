"""ODF 0.39 blocks in FlatBuffers: the manifest envelope, its versions, the block hash.

Invariants:

- A stored block is a FlatBuffers ``Manifest {kind: int64, version: int32, content: [ubyte]}``
  whose ``kind`` is the multicodec ``odf-metadata-block`` (0x400000) and whose ``content`` is
  the ``MetadataBlock`` as a FlatBuffer of its own.
- Written: version 3, built as the reference builds it (content first, then the envelope's
  fields in schema order), so the bytes, and the hash, are the reference's.
- Read: versions 2 and 3 (3 only fixed struct alignment; fields are found through the
  vtables, so both read alike). Reading uses ``struct`` alone, never the FlatBuffers runtime.
- A block's hash is the SHA3-256 multihash of the stored manifest bytes: stored bytes are
  hashed as they are (``check_stored``) before they are decoded, never re-serialized.
"""
from __future__ import annotations

import hashlib
from dataclasses import field
from typing import NamedTuple

from ..flatbuffers_codec import BlockFormatError, decode_table, encode_table
from ..multiformats import ODF_METADATA_BLOCK, SHA3_256, Multihash
from ..objects import default_scalar, odf
from ..shape import I32
from .events import MetadataBlock

CURRENT_VERSION = 3
READ_VERSIONS = (2, 3)


@odf
class Manifest:
    """The envelope every stored block is in."""

    kind: int = field(metadata=default_scalar(0))
    version: I32 = field(metadata=default_scalar(0))
    content: bytes


class SealedBlock(NamedTuple):
    block: MetadataBlock
    stored: bytes  # the manifest bytes, as stored and hashed

    @property
    def hash(self) -> Multihash:
        return block_hash(self.stored)


def encode_block(block: MetadataBlock) -> bytes:
    """The stored bytes of ``block``: a version-3 manifest, byte for byte the reference's."""
    content = encode_table(block)
    return encode_table(Manifest(kind=ODF_METADATA_BLOCK, version=CURRENT_VERSION, content=content))


def decode_block(stored: bytes) -> MetadataBlock:
    """The block a stored manifest holds; a manifest of another kind or version is refused."""
    return decode_table(MetadataBlock, decode_envelope(stored).content)


def decode_envelope(stored: bytes) -> Manifest:
    """The envelope of a stored block, once its kind and version are ones read here."""
    manifest = decode_table(Manifest, stored)
    if manifest.kind != ODF_METADATA_BLOCK:
        raise BlockFormatError(f"manifest kind 0x{manifest.kind:x} is not a MetadataBlock "
                               f"(0x{ODF_METADATA_BLOCK:x})")
    if manifest.version not in READ_VERSIONS:
        raise BlockFormatError(f"MetadataBlock manifest version {manifest.version} is not supported "
                               f"(this coordinator reads versions {READ_VERSIONS[0]} to {READ_VERSIONS[-1]})")
    return manifest


def block_hash(stored: bytes) -> Multihash:
    """The hash of a stored block: SHA3-256 multihash of its bytes."""
    return Multihash.sha3_256(stored)


def seal(block: MetadataBlock) -> SealedBlock:
    return SealedBlock(block, encode_block(block))


def check_stored(stored: bytes, name: Multihash) -> MetadataBlock:
    """The block stored under ``name``, decoded only once its bytes hash to that name."""
    if name.code != SHA3_256:
        raise BlockFormatError(f"block name {name} is not a SHA3-256 multihash (code 0x16)")
    if hashlib.sha3_256(stored).digest() != name.digest:  # block_hash(stored) != name, per block
        raise BlockFormatError(f"block {name}: its bytes hash to {block_hash(stored)}; "
                               "the stored block is damaged or not this block")
    return decode_block(stored)
