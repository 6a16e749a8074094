"""One metadata block in a file, in any form this coordinator reads, and the block's hash.

The four forms are told apart by the file itself:

- **stored FlatBuffers** when it holds a NUL byte (YAML text cannot hold one; every FlatBuffer
  does, in its root offset): an ODF 0.39 ``Manifest`` envelope (kind ``odf-metadata-block``,
  versions 2 and 3) hashes as the SHA3-256 multihash of its bytes as stored; an ODF 0.18 block
  hashes as the SHA3-256 of its bytes before the ``blockHash`` it ends with, which must agree.
  Stored bytes are hashed as they are, never re-serialized.
- **a YAML manifest** otherwise (``manifest.parse_manifest`` tells the forms apart by
  ``version`` / ``apiVersion``): an ODF 0.39 MetadataBlock hashes as its version-3 FlatBuffers
  bytes would, as the reference computes it; an ODF 0.18 one as its FlatBuffers encoding (a
  ``blockHash`` field in the file is ignored).

Each hash is written the way its version writes hashes: 64 hex digits (0.18), a base16
multihash ``f1620...`` (0.39).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from . import block_hash as block_hash_018
from .flatbuffers_codec import BlockFormatError, decode_block
from .manifest import MAX_MANIFEST, ManifestError, parse_manifest, read_bounded
from .objects import MetadataBlock
from .odf39 import codec as codec39
from .odf39 import events as events39


@dataclass(frozen=True)
class BlockHash:
    hash: str  # as the block's ODF version writes a hash
    odf: str  # "0.18" or "0.39"
    encoding: str  # "flatbuffers" (the file is a stored block) or "yaml" (a manifest)
    manifest_version: int | None = None  # 0.39: the version of the envelope that was hashed


def hash_block_file(path: str | Path) -> BlockHash:
    """The hash of the one block the file ``path`` holds, in whichever form it is."""
    name = str(path)
    data = read_bounded(path)
    if len(data) > MAX_MANIFEST:
        raise ManifestError(name, "", f"larger than {MAX_MANIFEST >> 20} MiB: not one metadata block")
    if b"\0" in data:
        return _stored(data, name)
    return _manifest(data, name)


def _stored(data: bytes, name: str) -> BlockHash:
    try:
        envelope = codec39.decode_envelope(data)
        codec39.decode_block(data)  # the content must be a block too, not only the envelope
        return BlockHash(str(codec39.block_hash(data)), "0.39", "flatbuffers", envelope.version)
    except BlockFormatError as e:
        not_039 = str(e)
    digest = hashlib.sha3_256(data[:-block_hash_018.HASH_LEN]).digest()
    try:
        block_hash_018.check_stored(data, digest)
        decode_block(data)
    except BlockFormatError as e:
        raise BlockFormatError(f"{name}: neither a stored ODF 0.39 block ({not_039}) nor an ODF 0.18 "
                               f"one ({e})") from None
    return BlockHash(digest.hex(), "0.18", "flatbuffers")


def _manifest(data: bytes, name: str) -> BlockHash:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(name, "", f"not UTF-8 text nor a stored block (byte {e.start})") from None
    loaded = parse_manifest(text, name, unsealed=True, adapt=False)
    block = loaded.content
    if isinstance(block, events39.MetadataBlock):
        sealed = codec39.seal(block)
        return BlockHash(str(sealed.hash), "0.39", "yaml", codec39.CURRENT_VERSION)
    if isinstance(block, MetadataBlock):
        return BlockHash(block_hash_018.compute_hash(block).hex(), "0.18", "yaml")
    raise ManifestError(name, "kind", f"holds a {type(block).__name__}, not a MetadataBlock "
                                      "(coord add takes DatasetSnapshot manifests)")
