"""The chain check used everywhere: block hashes, links, ordering and signatures.

It reads through a narrow ``BlockSource`` so the same check runs over a local dataset, a
folder repository or an S3 bucket before anything from there is trusted.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ..errors import CoordError
from .block_hash import check_stored
from .flatbuffers_codec import BlockFormatError, decode_block
from .objects import MetadataBlock
from .signing import SignatureStatus, VerifiedSignatures, check_signature


class BlockSource(Protocol):
    def read_block(self, block_hash: bytes) -> bytes | None: ...

    def read_signature(self, block_hash: bytes) -> bytes | None: ...


class CheckedBlocks(Protocol):
    """Blocks already read and checked from one source, by hash (see ``walk``), and the
    signatures of that source found valid before (by an earlier command, say)."""

    @property
    def signatures(self) -> VerifiedSignatures: ...

    def get(self, block_hash: bytes) -> ChainBlock | None: ...

    def __setitem__(self, block_hash: bytes, checked: ChainBlock) -> None: ...


class ChainError(CoordError):
    """A block that fails the check, named by hash with the reason."""

    def __init__(self, block_hash: bytes, reason: str):
        super().__init__(f"block {block_hash.hex()}: {reason}")
        self.block_hash = block_hash
        self.reason = reason


@dataclass(frozen=True)
class ChainBlock:
    hash: bytes
    block: MetadataBlock
    signature: SignatureStatus
    signer: bytes | None = None  # the public key of a valid signature


def load_block(source: BlockSource, block_hash: bytes) -> MetadataBlock:
    """Read one block and check that its bytes hash to the name it is stored under, then decode it."""
    data = source.read_block(block_hash)
    if data is None:
        raise ChainError(block_hash, "block is missing")
    try:
        check_stored(data, block_hash)
        return decode_block(data)
    except BlockFormatError as e:
        raise ChainError(block_hash, str(e)) from None


def walk(
    source: BlockSource,
    head: bytes | None,
    *,
    trusted: frozenset[bytes] = frozenset(),
    stop_at: bytes | None = None,
    checked: CheckedBlocks | None = None,
) -> Iterator[ChainBlock]:
    """Yield checked blocks from ``head`` back to the first block (or until ``stop_at``).

    Raises ChainError at the first block that fails: missing, hash mismatch, undecodable,
    an invalid signature, a system time later than its successor's, or a first block
    without a source.

    ``checked`` holds blocks already read and checked from the same source; they are taken
    from there instead of being read and checked again (a command walks a chain several
    times), and a signature found valid before is not checked again (its block's hash and
    links are). Verify and repository pulls never pass one.
    """
    expected = head
    later: ChainBlock | None = None
    while expected is not None and expected != stop_at:
        current = checked.get(expected) if checked is not None else None
        if current is None:
            current = _check(source, expected, trusted,
                             checked.signatures if checked is not None else None)
            if checked is not None:
                checked[expected] = current
        block = current.block
        if later is not None and block.system_time > later.block.system_time:
            raise ChainError(later.hash, "system time goes backwards from its predecessor")
        yield current
        if block.prev_block_hash is None and block.source is None:
            raise ChainError(expected, "the first block of a dataset must define its source")
        later, expected = current, block.prev_block_hash
    if stop_at is not None and expected != stop_at:
        raise ChainError(later.hash if later else stop_at, f"chain does not reach {stop_at.hex()}")


def _check(source: BlockSource, block_hash: bytes, trusted: frozenset[bytes],
           verified: VerifiedSignatures | None) -> ChainBlock:
    block = load_block(source, block_hash)
    status, signer = check_signature(block_hash, source.read_signature(block_hash), set(trusted),
                                     verified)
    if status is SignatureStatus.INVALID:
        raise ChainError(block_hash, "signature does not match the block")
    return ChainBlock(block_hash, block, status, signer)
