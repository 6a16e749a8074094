"""A dataset inside a repository: the same layout as a local dataset folder.

It is a ``BlockSource``, so ``metadata.chain.walk`` checks a remote chain exactly as a local
one. Nothing read from a repository is trusted until that walk (and the data hashes) pass.
"""
from __future__ import annotations

from ..errors import CoordError
from ..workspace import layout
from .fileio import FileIO


class SyncError(CoordError):
    """Push or pull cannot proceed; the message says why and what to do."""


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
        data, token = self.io.read_ref(self.file(layout.HEAD))
        if data is None:
            return None, token
        try:
            return bytes.fromhex(data.decode().strip()), token
        except ValueError:
            raise SyncError(f"{self.path}/{layout.HEAD} in the repository is not a block hash") from None

    def swap_head(self, new: bytes, expected: object) -> None:
        self.io.swap_ref(self.file(layout.HEAD), new.hex().encode() + b"\n", expected)

    def read_block(self, block_hash: bytes) -> bytes | None:
        if block_hash not in self.blocks:
            data = self.io.read_bytes(self.file(layout.block_file(block_hash)))
            if data is None:
                return None
            self.blocks[block_hash] = data
        return self.blocks[block_hash]

    def read_signature(self, block_hash: bytes) -> bytes | None:
        if block_hash not in self.signatures:
            self.signatures[block_hash] = self.io.read_bytes(self.file(layout.signature_file(block_hash)))
        return self.signatures[block_hash]

    def files(self, folder: str) -> dict[str, int]:
        """Files under one of the dataset's folders ("" for all), relative to the dataset: path → size."""
        start = len(self.path) + 1
        listed = self.io.list_files(self.file(folder) if folder else self.path)
        return {p[start:]: size for p, size in listed.items()}
