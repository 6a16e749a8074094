"""The append path (docs/architecture.md, Workspace): one writer per dataset, all or nothing.

Every block that enters a dataset goes through ``DatasetWriter``: a new one made here
(``commit``, which seals and signs it) and blocks already sealed and signed elsewhere
(``install_sealed``, a repository pull). Both write, each step durable before the next:
  data file → checkpoint → block → signature → source state → ``refs/head``.
Only the last step makes anything visible; readers follow ``refs/head``. A crash before it
leaves files no chain reaches: the next writer removes them (``recover``) and redoes the
work, so it happens exactly once. ``COORD_CRASH_AT=<step>`` kills the process at a step
(see ``crash.py``), which the tests use to prove this. An OS error (a full disk) while the
writer is held ends as a ``CommitError`` naming the file and the head the dataset stays at.

The writer holds the dataset's read model (``state``), taken once under the lock and advanced
by each append, so nothing in a writing command walks the chain again.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Conflict, CoordError
from ..metadata.block_hash import HASH_LEN, check_stored, seal
from ..metadata.chain import ChainBlock
from ..metadata.flatbuffers_codec import BlockFormatError
from ..metadata.objects import MetadataBlock
from ..metadata.signing import SignatureStatus, verified_fact
from . import layout
from .crash import crash_point
from .fsutil import TMP_PREFIX, atomic_write, install, remove
from .lock import DatasetLock, LockedWriter
from .slice_cache import remember_installed
from .source_state import SourceState
from .state import DatasetState

if TYPE_CHECKING:
    from .dataset import Dataset  # the dataset hands out its writer (Dataset.writer)

CRASH_POINTS = (
    "data-installed",
    "checkpoint-installed",
    "block-written",
    "signature-written",
    "state-written",
    "head-updated",
)


class CommitError(CoordError):
    pass


class HeadMoved(CommitError, Conflict):
    """Another writer moved the head since this one read it (a lost compare-and-swap)."""


@dataclass(frozen=True)
class SealedBlock:
    """A block sealed and signed elsewhere, with the files it comes with (already checked
    against its DataSlice by whoever fetched them)."""

    checked: ChainBlock  # its hash, decoded block and signer, as the chain check found them
    data: bytes  # the stored bytes, exactly as hashed
    signature: bytes | None
    data_file: Path | None = None
    checkpoint_dir: Path | None = None


class DatasetWriter(LockedWriter):
    """Holds the dataset's lock; use as a context manager."""

    def __init__(self, ds: Dataset, known: DatasetState | None = None):
        super().__init__(DatasetLock(ds.ws.meta / layout.lock_file(ds.id), ds.id))
        self.ds = ds
        self._known = known
        self._state: DatasetState | None = None

    def _open(self) -> None:
        self._state = self._current(self._known)
        self.recover()

    def _after_os_error(self) -> None:
        self._state = self._current(self._state)  # the head may have moved after all
        self.recover()  # what the step wrote is unreachable: give its space back now

    def _os_error(self, exc: OSError) -> CommitError:
        where = f": {exc.filename}" if exc.filename else ""
        at = f"block {self.head.hex()[:12]}" if self.head else "no block"
        return CommitError(
            f"{exc.strerror or exc}{where}; nothing of this step was committed, {self.ds.id} "
            f"stays at {at}; run the command again once that is fixed"
        )

    def _current(self, known: DatasetState | None) -> DatasetState | None:
        """``known`` if the head is still its head, else the dataset's state read now."""
        head = self.ds.head()
        if head is None:
            return None
        return known if known is not None and known.head == head else self.ds.state()

    @property
    def state(self) -> DatasetState | None:
        """The dataset as this writer holds it (None: no block yet)."""
        return self._state

    @property
    def head(self) -> bytes | None:
        return self._state.head if self._state is not None else None

    # --- appending --------------------------------------------------------------------------

    def commit(
        self,
        block: MetadataBlock,
        *,
        data_file: Path | None = None,
        checkpoint_dir: Path | None = None,
        source_state: SourceState | None = None,
    ) -> bytes:
        """Append ``block`` (its ``prev_block_hash`` is set here) and return its hash."""
        head = self.head
        if block.prev_block_hash not in (None, head):
            raise HeadMoved(f"dataset {self.ds.id} changed while the block was prepared")
        if (data_file is None) != (block.output_slice is None):
            raise CommitError("a block has an output slice exactly when it comes with a data file")
        if self._state is not None and block.system_time < self._state.last_updated:
            raise CommitError("system time of a new block is earlier than the head's")
        sealed, data = seal(dataclasses.replace(block, prev_block_hash=head))
        h = data[-HASH_LEN:]  # the block hash, which seal writes as the last bytes
        key = self.ds.ws.signing_key
        checked = ChainBlock(h, sealed, SignatureStatus.TRUSTED, key.public_key)
        signature = key.sign(h)
        self._write(SealedBlock(checked, data, signature.to_bytes(), data_file, checkpoint_dir),
                    source_state)
        # made here, so valid: a later command's chain walk need not check it (nor import the
        # Ed25519 code to) -- the same fact a check that passed would have remembered
        self.ds.ws.checked_blocks(self.ds.id).signatures.add(verified_fact(h, signature))
        self._publish(head, [checked], fetch_state=source_state is not None)
        crash_point("head-updated")
        return h

    def install_sealed(self, blocks: Sequence[SealedBlock]) -> None:
        """Append blocks sealed and signed elsewhere (oldest first) with one move of the head.

        Each block's bytes must hash to its name and link to the block before it (the first
        to this writer's head); they are stored byte for byte."""
        prev = self.head
        for b in blocks:
            h = b.checked.hash
            try:
                check_stored(b.data, h)
            except BlockFormatError as e:
                raise CommitError(f"block {h.hex()}: {e}; nothing was installed") from None
            if b.checked.block.prev_block_hash != prev:
                raise CommitError(f"block {h.hex()} does not follow the head of {self.ds.id}; "
                                  "nothing was installed")
            prev = h
        for b in blocks:
            self._write(b, None)
        crash_point("pull-files-installed")
        self._publish(self.head, [b.checked for b in blocks], fetch_state=False)

    def _write(self, b: SealedBlock, source_state: SourceState | None) -> None:
        h = b.checked.hash
        if b.data_file is not None:
            install(b.data_file, self.ds.data_file(h))
        crash_point("data-installed")
        if b.checkpoint_dir is not None:
            install(b.checkpoint_dir, self.ds.checkpoint_dir(h))
        crash_point("checkpoint-installed")
        atomic_write(self.ds.block_path(h), b.data)
        crash_point("block-written")
        if b.signature is not None:
            atomic_write(self.ds.signature_path(h), b.signature)
        crash_point("signature-written")
        if source_state is not None:
            atomic_write(self.ds.state_path(h), source_state.to_json())
        crash_point("state-written")

    def _publish(self, expected: bytes | None, new: list[ChainBlock], *, fetch_state: bool) -> None:
        self.move_head(expected, new[-1].hash)
        # their bytes were hashed as they were made, or checked as they were fetched: the first
        # read after this commit need not hash them again (trust/slice_check.py)
        remember_installed(self.ds, [(cb.hash, cb.block.output_slice) for cb in new
                                     if cb.block.output_slice is not None])
        for cb in new:
            self._state = (self._state.appended(cb, fetch_state=fetch_state) if self._state is not None
                           else DatasetState.build(self.ds.id, [cb], frozenset([cb.hash]) if fetch_state
                                                   else frozenset()))

    def reset(self, to: bytes) -> None:
        """Move the head back to an earlier block of the chain (later blocks are removed)."""
        if self._state is None or to not in self._state.hashes:
            raise CommitError(f"block {to.hex()} is not in the chain of {self.ds.id}")
        self.move_head(self.head, to)
        self._state = self._state.up_to(to)
        self.recover()

    def move_head(self, expected: bytes | None, new: bytes) -> None:
        # We hold the lock, so this compare is a guard against a writer that ignored it.
        if self.ds.head() != expected:
            raise HeadMoved(f"head of {self.ds.id} moved during the commit")
        atomic_write(self.ds.head_path, new.hex().encode() + b"\n")

    # --- recovery ---------------------------------------------------------------------------

    def recover(self) -> None:
        """Remove what an interrupted commit left: temp files and blocks no chain reaches."""
        root = self.ds.root
        reachable = {h.hex() for h in self._state.hashes} if self._state is not None else set()
        for entry in _entries(root / layout.REFS):
            if entry.name.startswith(TMP_PREFIX):
                remove(entry)
        for folder in layout.BLOCK_FOLDERS:  # files named by block hash, and temporaries
            for entry in _entries(root / folder):
                if entry.name not in reachable:
                    remove(entry)
        for entry in _entries(self.ds.state_dir):
            if entry.stem not in reachable:
                remove(entry)


def _entries(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.exists() else []
