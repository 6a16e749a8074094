"""A dataset inside a repository: the same layout as a local dataset folder.

It is a ``BlockSource``, so ``metadata.chain.walk`` checks a remote chain exactly as a local
one. Nothing read from a repository is trusted until that walk (and the data hashes) pass,
and nothing is decoded before it is bounded and, where the chain commits to it, hashed:

- the ref is read up to ``MAX_REF`` bytes and must be 64 hex digits (and a newline);
- a block is read up to ``MAX_BLOCK`` bytes and hashed against its name before it is
  parsed (``metadata.block_hash.check_stored``). A block stored as a YAML manifest (kamu-cli
  of the ODF 0.18 era wrote them) is the exception, as text cannot be hashed before it is
  parsed: it is parsed only when it starts like a manifest, up to ``MAX_BLOCK_MANIFEST``
  bytes, without aliases, checked against the manifest schema, and taken only when the hash
  of its FlatBuffers form equals its name; from then on it is those FlatBuffers bytes;
- a signature is read up to ``MAX_SIGNATURE`` bytes before its YAML is parsed (it is
  checked against the block hash it signs);
- data files and checkpoint files are read up to the size the listing gave; a data file's
  SHA3-256 is computed while it streams in and compared with the block's physical hash
  before Parquet reads it. A slice without a physical hash (written by other tools; 0.18 has
  no such field) can only be checked by its logical hash, over the decoded records: pyarrow
  reads that file in the staging folder, and nothing is installed unless it matches.
  Checkpoints are not covered by any hash in ODF 0.18: they are engine state, read only by
  the sandboxed engine, and ``verify`` replays without them.

Names the repository lists become local paths only through ``checked_name``.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import Conflict, CoordError, NotFound
from ..metadata.block_hash import seal
from ..metadata.chain import ChainError
from ..metadata.manifest import ManifestError, load_block_manifest
from ..workspace import layout
from .fileio import FileIO, OutsideRepository, TooLarge, WrongKind

if TYPE_CHECKING:
    from ..metadata.ids import DatasetRef
    from ..trust.authorship import Signer

MAX_REF = 256  # 64 hex digits and a newline, with room to spare
MAX_BLOCK = 16 << 20  # a block holds metadata only: queries, schemas, hashes
MAX_SIGNATURE = 4 << 10  # algorithm, public key and signature in a small YAML document

_HEAD = re.compile(rb"[0-9a-f]{64}\n?")
# FlatBuffers blocks start with a 4-byte root offset, never with these letters.
_MANIFEST_START = re.compile(rb"\s*(---|apiVersion\s*:|kind\s*:|content\s*:)")
# One path component as this project and Spark name checkpoint files; no "." or ".." alone.
_COMPONENT = re.compile(r"(?!\.\.?$)[A-Za-z0-9._=+-]{1,255}")
MAX_DEPTH = 32


class SyncError(CoordError):
    """Push or pull cannot proceed; the message says why and what to do."""


class Diverged(SyncError, Conflict):
    """The local and the remote chain each have blocks the other lacks, or the remote moved
    while we pushed: pull (or reset) first."""


def read_ref(io: FileIO, where: str, form: re.Pattern[bytes], described: str) -> tuple[bytes | None, object]:
    """A ref's bytes (None: there is none) and its compare-and-swap token; read up to
    ``MAX_REF`` bytes and matched against ``form`` before anything else reads them."""
    try:
        data, token = io.read_ref(where, MAX_REF)
    except (TooLarge, OutsideRepository) as e:
        raise SyncError(f"ref {e}: not a block hash") from None
    except WrongKind as e:
        raise SyncError(f"ref {e}") from None
    if data is not None and not form.fullmatch(data):
        raise SyncError(f"ref {where}: not a block hash (expected {described})")
    return data, token


class RemoteDatasetNotFound(SyncError, NotFound):
    """No dataset at a reference (a repository's folder or a URL without a head)."""

    @classmethod
    def at(cls, ref: object) -> RemoteDatasetNotFound:
        # the reference names the dataset already, and a failed pull's line names it first
        return cls(f"{ref}: no dataset there (no head); check the dataset's name and the "
                   "repository's URL")


class RemotePullStatus(enum.StrEnum):
    """What a pull from a repository found (either ODF version)."""

    PULLED = "pulled"
    UP_TO_DATE = "up to date"
    AHEAD = "ahead"  # the local copy has blocks the remote lacks: nothing to pull


@dataclass(frozen=True)
class RemotePullResult:
    dataset_id: str  # the local dataset
    source: DatasetRef
    status: RemotePullStatus
    blocks: int  # blocks pulled (or, when ahead, blocks the remote lacks)
    message: str
    signers: list[Signer] = field(default_factory=list)  # of the blocks pulled


def checked_name(rel: str) -> str:
    """A relative path from a repository listing, refused unless every component is plain."""
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH or not all(_COMPONENT.fullmatch(p) for p in parts):
        raise SyncError(f"{rel!r} in the repository is not a plain file name (nothing was pulled)")
    return rel


class RemoteDataset:
    def __init__(self, io: FileIO, path: str):
        self.io = io
        self.path = path  # the dataset's folder in the repository
        # Blocks read while walking are kept: pull installs exactly the bytes it checked.
        self.blocks: dict[bytes, bytes] = {}
        self.signatures: dict[bytes, bytes | None] = {}

    def file(self, relative: str) -> str:
        return f"{self.path}/{relative}"

    def read_head(self) -> tuple[bytes | None, object]:
        """The head block hash (None if the dataset is not there) and the ref's CAS token."""
        data, token = read_ref(self.io, self.file(layout.HEAD), _HEAD, "64 lowercase hex digits")
        return (bytes.fromhex(data.decode()) if data is not None else None), token

    def swap_head(self, new: bytes, expected: object) -> None:
        self.io.swap_ref(self.file(layout.HEAD), new.hex().encode() + b"\n", expected)

    def read_block(self, block_hash: bytes) -> bytes | None:
        """The block's FlatBuffers bytes (a YAML-stored block already re-encoded and checked)."""
        if block_hash not in self.blocks:
            data = self._read(block_hash, layout.block_file(block_hash), MAX_BLOCK, "block")
            if data is None:
                return None
            if _MANIFEST_START.match(data):
                data = _from_manifest(block_hash, data)
            self.blocks[block_hash] = data
        return self.blocks[block_hash]

    def read_signature(self, block_hash: bytes) -> bytes | None:
        if block_hash not in self.signatures:
            self.signatures[block_hash] = self._read(
                block_hash, layout.signature_file(block_hash), MAX_SIGNATURE, "signature")
        return self.signatures[block_hash]

    def _read(self, block_hash: bytes, rel: str, limit: int, what: str) -> bytes | None:
        try:
            return self.io.read_bytes(self.file(rel), limit)
        except TooLarge:
            raise ChainError(block_hash, f"{what} is larger than {limit} bytes") from None
        except WrongKind as e:  # the object, or one of its folders
            raise ChainError(block_hash, f"{what} is a {e.kind}, not a file" if e.path == self.file(rel)
                             else str(e)) from None
        except OutsideRepository as e:
            raise ChainError(block_hash, str(e)) from None

    def files(self, folder: str) -> dict[str, int]:
        """Files under one of the dataset's folders ("" for all), relative to the dataset: path → size."""
        start = len(self.path) + 1
        listed = self.io.list_files(self.file(folder) if folder else self.path)
        return {p[start:]: size for p, size in listed.items()}


def _from_manifest(block_hash: bytes, data: bytes) -> bytes:
    """The FlatBuffers form of a block stored as YAML, if it hashes to the name it is stored under."""
    try:
        block = load_block_manifest(data, "YAML block")
    except ManifestError as e:
        raise ChainError(block_hash, str(e)) from None
    sealed = seal(block)
    if sealed.hash != block_hash:
        raise ChainError(block_hash, "content hash does not match its name (YAML block, hashed in "
                                     "its FlatBuffers form)")
    if block.block_hash != block_hash:
        raise ChainError(block_hash, "YAML block: content.blockHash is not its name")
    return sealed.stored
