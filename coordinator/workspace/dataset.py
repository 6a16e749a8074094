"""One dataset of the workspace: the read side (head, checked blocks, data files, state).

On disk it is the spec's sharing layout (``layout.py``), copied unchanged by push and pull.
"""
from __future__ import annotations

import json
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..errors import Conflict, NotFound
from ..metadata import chain
from ..metadata.objects import DatasetSourceRoot, MetadataBlock
from . import layout
from .source_state import SourceState
from .state import DatasetState

if TYPE_CHECKING:
    from .commit import DatasetWriter
    from .workspace import Workspace


class BlockNotFound(NotFound):
    """No block (of a dataset, or of any) has the hash or prefix given."""


class DatasetNotFound(NotFound):
    def __init__(self, dataset_id: str):
        super().__init__(f"dataset {dataset_id} does not exist in this workspace")
        self.dataset_id = dataset_id


class CurrentOdfDataset(Conflict):
    """A command that reads ODF 0.18 chains only was given a current-ODF dataset."""

    def __init__(self, dataset_id: str):
        super().__init__(f"dataset {dataset_id} is stored in current ODF (0.39), which this "
                         "command does not handle yet; it works on ODF 0.18 datasets")
        self.dataset_id = dataset_id


class CheckedBlocks:
    """Blocks of one local dataset already checked in this process (``chain.CheckedBlocks``).

    An entry holds while its block and signature files are unchanged (same inode, size and
    modification time), so a file replaced or edited since is read and checked again (an
    edit within the file system's timestamp granularity of the check could go unseen in
    this process; the next command, and verify always, read everything again).

    ``signatures`` outlives the process: the Ed25519 checks passed, kept in the dataset's
    cache folder, so a later command reads, hashes and decodes each block but checks only
    the signatures it has not seen valid before (the check was half a block's cost).
    """

    def __init__(self, root: Path, verified: Path):
        self.root = str(root)  # a string: paths are joined per block, pathlib costs more
        self._entries: dict[bytes, tuple[tuple, chain.ChainBlock]] = {}
        self.signatures = VerifiedSignatureFile(verified)

    def get(self, block_hash: bytes) -> chain.ChainBlock | None:
        entry = self._entries.get(block_hash)
        return entry[1] if entry is not None and entry[0] == self._stamp(block_hash) else None

    def __setitem__(self, block_hash: bytes, checked: chain.ChainBlock) -> None:
        self._entries[block_hash] = (self._stamp(block_hash), checked)

    def _stamp(self, block_hash: bytes) -> tuple:
        stamps: list[tuple[int, int, int] | None] = []
        for name in (layout.block_file(block_hash), layout.signature_file(block_hash)):
            try:
                st = os.stat(f"{self.root}/{name}")
                stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                stamps.append(None)
        return tuple(stamps)


class VerifiedSignatureFile:
    """``signing.VerifiedSignatures`` kept in a file: the facts, 32 bytes each, appended.

    It is a cache, read when first asked and never required: a file that cannot be read or
    written costs only the checks again, and a torn last record is ignored. Only this
    workspace writes it; ``verify`` and repository pulls do not use it.
    """

    _SIZE = 32

    def __init__(self, path: Path):
        self.path = path
        self._facts: set[bytes] | None = None
        self._out: BinaryIO | None = None  # opened at the first fact added (a walk adds many)

    def __contains__(self, fact: bytes) -> bool:
        return fact in self._loaded()

    def add(self, fact: bytes) -> None:
        facts = self._loaded()
        if fact in facts:
            return
        facts.add(fact)
        try:
            if self._out is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._out = out = open(self.path, "ab", buffering=0)
                weakref.finalize(self, out.close)
                if torn := out.tell() % self._SIZE:  # a write cut short: the facts stay aligned
                    out.truncate(out.tell() - torn)
            self._out.write(fact)  # one write(2) of 32 bytes: appends do not interleave
        except OSError:
            pass  # a read-only workspace: the next command checks the signature again

    def _loaded(self) -> set[bytes]:
        if self._facts is None:
            try:
                data = self.path.read_bytes()
            except OSError:
                data = b""
            whole = len(data) - len(data) % self._SIZE
            self._facts = {data[i : i + self._SIZE] for i in range(0, whole, self._SIZE)}
        return self._facts


class Dataset:
    def __init__(self, ws: Workspace, dataset_id: str):
        self.ws = ws
        self.id = dataset_id
        self.root = ws.meta / layout.dataset_dir(dataset_id)
        self._checked = ws.checked_blocks(dataset_id)

    # --- paths --------------------------------------------------------------------------------

    @property
    def head_path(self) -> Path:
        return self.root / layout.HEAD

    def block_path(self, block_hash: bytes) -> Path:
        return self.root / layout.block_file(block_hash)

    def signature_path(self, block_hash: bytes) -> Path:
        return self.root / layout.signature_file(block_hash)

    def data_file(self, block_hash: bytes) -> Path:
        return self.root / layout.data_file(block_hash)

    def checkpoint_dir(self, block_hash: bytes) -> Path:
        return self.root / layout.checkpoint_dir(block_hash)

    def state_path(self, block_hash: bytes) -> Path:
        return self.ws.meta / layout.state_file(self.id, block_hash)

    @property
    def state_dir(self) -> Path:
        return self.ws.meta / layout.cache_dir(self.id, layout.STATE)

    @property
    def remotes_path(self) -> Path:
        """Where the dataset was last pushed to and pulled from (``repository.registry``)."""
        return self.ws.meta / layout.cache_dir(self.id, layout.REMOTES)

    # --- reading ------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the workspace holds a dataset of this name, in either ODF version."""
        return self.head_path.exists() or self.ws.odf_of(self.id) is not None

    def head(self) -> bytes | None:
        """The newest block of the 0.18 chain (None: no block); a current-ODF dataset of this
        name is refused (``CurrentOdfDataset``): every 0.18 read starts here."""
        try:
            return bytes.fromhex(self.head_path.read_text().strip())
        except FileNotFoundError:
            if self.ws.odf_of(self.id) is not None:
                raise CurrentOdfDataset(self.id) from None
            return None

    def read_block(self, block_hash: bytes) -> bytes | None:
        return _read_if_exists(f"{self.root}/{layout.block_file(block_hash)}")

    def read_signature(self, block_hash: bytes) -> bytes | None:
        return _read_if_exists(f"{self.root}/{layout.signature_file(block_hash)}")

    def chain(self, stop_at: bytes | None = None) -> Iterator[chain.ChainBlock]:
        """Checked blocks, newest first (hash, links, signatures; see metadata.chain)."""
        head = self.head()
        if head is None:
            raise DatasetNotFound(self.id)
        return chain.walk(self, head, trusted=self.ws.trusted_keys(), stop_at=stop_at,
                          checked=self._checked)

    def blocks(self, stop_at: bytes | None = None) -> Iterator[tuple[bytes, MetadataBlock]]:
        for cb in self.chain(stop_at):
            yield cb.hash, cb.block

    def state(self) -> DatasetState:
        """The dataset's read model, built in one walk of its chain (``state.py``)."""
        try:
            names = [p.stem for p in self.state_dir.iterdir()]
        except FileNotFoundError:
            names = []
        stored = frozenset(bytes.fromhex(n) for n in names if _is_hex(n))
        return DatasetState.build(self.id, self.chain(), stored)

    def data_files(self, up_to: bytes | None = None) -> list[Path]:
        """The dataset's Parquet slices, oldest first; with ``up_to``, only those of that
        block of the chain and of the blocks before it."""
        blocks = list(self.blocks())
        if up_to is not None:
            blocks = blocks[[h for h, _ in blocks].index(up_to):]
        return [self.data_file(h) for h, b in reversed(blocks) if b.output_slice]

    def remote(self, direction: str) -> str | None:
        """``REPO/[USER/]ID`` it was last pushed to (``direction="push"``) or pulled from (``"pull"``)."""
        path = self.remotes_path
        return json.loads(path.read_text()).get(direction) if path.exists() else None

    def source_state(self, state: DatasetState | None = None) -> SourceState | None:
        """The ingest state stored with the newest block that has one (of ``state``'s chain),
        read against the fetch step in force (``source_state.py``)."""
        state = state or self.state()
        h = state.fetch_state_block
        if h is None:
            return None
        path = self.state_path(h)
        source = state.source
        step = source.fetch if isinstance(source, DatasetSourceRoot) else None
        return SourceState.from_json(path.read_bytes(), where=f"{self.id}: {path}", step=step)

    # --- writing ------------------------------------------------------------------------------

    def writer(self, known: DatasetState | None = None) -> DatasetWriter:
        """The dataset's writer; ``known``: a state read earlier in this command, taken as the
        writer's if the head has not moved since (else the chain is read again)."""
        from .commit import DatasetWriter  # the append path: only for a command that writes

        return DatasetWriter(self, known)


def _read_if_exists(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _is_hex(name: str) -> bool:
    try:
        bytes.fromhex(name)
    except ValueError:
        return False
    return True
