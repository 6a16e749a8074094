"""The one append path of a current-ODF dataset folder: all or nothing, one writer.

Every block enters a dataset through ``DatasetWriter`` (a context manager holding the
dataset's lock): ``seed`` starts a dataset, ``append`` seals a new block at the head, and
``append_sealed`` takes a block sealed elsewhere (its bytes and the block they decode to).
Each block is first checked against the state with the chain rules (``odf39.chain``) and its
objects against the event (a file given is the one the event names, by size; an object not
given must already be stored); then, each step durable before the next (write under a
temporary name, fsync, rename, fsync the folder: ``workspace.fsutil``):

    data file -> checkpoint -> block -> signature -> caller's own file -> refs/head (CAS)

The caller's own file (``beside``: a workspace's fetch state, kept outside the folder and
named by the block's hash) is written once the block is, so a crash leaves none whose block
the chain does not reach, and none missing for a block it does.

A writer given a ``signer`` signs each block it makes (``signatures/<multihash>``, the
``metadata.signing.Signature`` document over the block hash's binary multihash); a block
sealed elsewhere comes with its signature bytes, or none (the reference signs nothing).

Only the last step makes anything visible: readers follow ``refs/head``. A crash before it
leaves objects no chain names, which the next writer removes (``recover``), so the previous
head stays valid and nothing half-written is ever reached. ``COORD_CRASH_AT=<point>`` kills
the process at a step (``workspace.crash``; ``CRASH_POINTS``).

The writer trusts the hashes in the event it is given (the caller computed them while
writing, ``odf_slice.write_slice``); ``verify`` checks them against the files.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Conflict
from ..metadata.did import DatasetId
from ..metadata.multiformats import SHA3_256, Multihash
from ..metadata.odf39 import codec
from ..metadata.odf39.events import (
    Checkpoint,
    DatasetKind,
    DataSlice,
    MetadataBlock,
    MetadataEvent,
    Seed,
)
from ..workspace.crash import crash_point
from ..workspace.fsutil import atomic_write, install, physical_hash, remove
from ..workspace.lock import DatasetLock, LockedWriter
from . import layout
from .read import DatasetState, StoredBlock, StoreError, build, objects_of, read_head, read_state

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..data.odf_slice import SliceHashes
    from ..metadata.signing import SigningKey

CRASH_POINTS = ("odf-data-installed", "odf-checkpoint-installed", "odf-block-written",
                "odf-signature-written", "odf-beside-written", "odf-head-updated")


class AppendError(StoreError):
    """A block not appended: refused before anything of it was written, or stopped by an OS
    error part-way (what it wrote is then unreachable and removed)."""


class HeadMoved(AppendError, Conflict):
    """``refs/head`` is not where this writer left it (a lost compare-and-swap)."""


class DatasetWriter(LockedWriter):
    """The only writer of the dataset folder ``root`` while it holds ``lock``."""

    def __init__(self, root: Path, lock: Path, known: DatasetState | None = None,
                 signer: SigningKey | None = None):
        super().__init__(DatasetLock(lock, root.name))
        self.root = root
        self._known = known
        self._signer = signer
        self._state: DatasetState | None = None

    def _open(self) -> None:
        known = self._known
        # the chain is content-addressed: a state whose head is the head is current
        current = known is not None and known.head == read_head(self.root)
        self._state = known if current else read_state(self.root)
        self.recover()

    def _after_os_error(self) -> None:
        self.recover()  # the head moves last: what the step wrote is unreachable, remove it

    def _os_error(self, exc: OSError) -> AppendError:
        at = f"block {self.head}" if self.head else "no block"
        return AppendError(f"{exc.strerror or exc}: {exc.filename or self.root}; nothing of "
                           f"this block was committed, {self.root} stays at {at}; append "
                           "again once that is fixed")

    @property
    def state(self) -> DatasetState | None:
        """The dataset as this writer holds it (None: no block yet)."""
        return self._state

    @property
    def head(self) -> Multihash | None:
        return self._state.head if self._state is not None else None

    # --- appending --------------------------------------------------------------------------

    def seed(self, key: Ed25519PrivateKey, kind: DatasetKind, system_time: datetime,
             alias: str | None = None) -> DatasetId:
        """Start the dataset: a Seed whose id is the ``did:odf`` of the Ed25519 ``key`` (the
        key stays the caller's); ``alias`` is written to ``info/alias`` as the reference does."""
        if self._state is not None:
            raise AppendError(f"{self.root} already holds dataset {self._state.id}; a Seed is "
                              "only ever the first block")
        dataset_id = DatasetId.from_public_key(key)
        if alias is not None:
            atomic_write(self.root / layout.ALIAS, alias.encode())
        self.append(Seed(dataset_id=dataset_id, dataset_kind=kind), system_time=system_time)
        return dataset_id

    def append(self, event: MetadataEvent, *, system_time: datetime,
               data: Path | None = None, checkpoint: Path | None = None,
               beside: Callable[[Multihash], None] | None = None) -> Multihash:
        """Seal ``event`` as the block after the head and append it with its files (moved
        into the folder); ``beside`` writes the caller's own file of the block (given its
        hash) before the head moves. Returns the new head."""
        state = self._state
        block = MetadataBlock(system_time=system_time,
                              prev_block_hash=state.head if state else None,
                              sequence_number=state.sequence_number + 1 if state else 0,
                              event=event)
        sealed = codec.seal(block)
        signature = self._signer.sign(sealed.hash.to_bytes()).to_bytes() if self._signer else None
        return self.append_sealed(sealed, data=data, checkpoint=checkpoint, signature=signature,
                                  beside=beside)

    def append_sealed(self, sealed: codec.SealedBlock, *, data: Path | None = None,
                      checkpoint: Path | None = None, signature: bytes | None = None,
                      beside: Callable[[Multihash], None] | None = None) -> Multihash:
        """Append a sealed block (``sealed.stored`` decodes to ``sealed.block``) with its
        signature document, if it has one (checked by whoever fetched it)."""
        stored = StoredBlock(sealed.hash, sealed.block)
        after = build([stored], self._state, strict=True)  # the chain rules, before anything is written
        data_slice, new_checkpoint = objects_of(sealed.block)
        if data_slice is not None:
            self._place(data, layout.data_file(data_slice.physical_hash), data_slice.size, "data")
        elif data is not None:
            raise AppendError(f"block {sealed.block.sequence_number} adds no data; "
                              f"{data} has no place in it")
        crash_point("odf-data-installed")
        if new_checkpoint is not None:
            self._place(checkpoint, layout.checkpoint_file(new_checkpoint.physical_hash),
                        new_checkpoint.size, "checkpoint")
        elif checkpoint is not None:
            raise AppendError(f"block {sealed.block.sequence_number} has no new checkpoint; "
                              f"{checkpoint} has no place in it")
        crash_point("odf-checkpoint-installed")
        atomic_write(self.root / layout.block_file(sealed.hash), sealed.stored)
        crash_point("odf-block-written")
        if signature is not None:
            atomic_write(self.root / layout.signature_file(sealed.hash), signature)
        crash_point("odf-signature-written")
        if beside is not None:
            beside(sealed.hash)
        crash_point("odf-beside-written")
        self._move_head(self.head, sealed.hash)
        crash_point("odf-head-updated")
        self._state = after
        return sealed.hash

    def _place(self, given: Path | None, name: str, size: int, what: str) -> None:
        """Move ``given`` to ``name``, or find ``name`` already stored (content-addressed)."""
        target = self.root / name
        if given is None:
            if not target.is_file():
                raise AppendError(f"the block names {what} {name}, which is not in "
                                  f"{self.root}; give the file to append it with")
            return
        if given.stat().st_size != size:
            raise AppendError(f"{given} is {given.stat().st_size} bytes; the block's {what} "
                              f"{name} is {size}: not the file the block names")
        install(given, target)

    def _move_head(self, expected: Multihash | None, new: Multihash) -> None:
        # We hold the lock, so this compare guards against a writer that ignored it.
        if read_head(self.root) != expected:
            raise HeadMoved(f"{self.root / layout.HEAD} moved during the append; read the "
                            "dataset again and retry")
        atomic_write(self.root / layout.HEAD, str(new).encode())  # no newline, as the reference

    def reset(self, to: Multihash) -> None:
        """Move the head back to ``to``, a block of the chain; the later blocks and the
        objects only they name are removed (the head moves first, so a crash leaves files no
        chain reaches, which the next writer removes)."""
        blocks = self._state.blocks if self._state is not None else ()
        at = next((i for i, b in enumerate(blocks) if b.hash == to), None)
        if at is None:
            raise AppendError(f"block {to} is not in the chain of {self.root}")
        after = build(list(blocks[: at + 1]))
        self._move_head(self.head, to)
        self._state = after
        self.recover()

    # --- recovery ---------------------------------------------------------------------------

    def recover(self) -> None:
        """Remove what an interrupted append left: temporaries, and objects no block names."""
        named = set()
        for stored in self._state.blocks if self._state is not None else ():
            named.add(layout.block_file(stored.hash))
            named.add(layout.signature_file(stored.hash))
            data_slice, new_checkpoint = objects_of(stored.block)
            if data_slice is not None:
                named.add(layout.data_file(data_slice.physical_hash))
            if new_checkpoint is not None:
                named.add(layout.checkpoint_file(new_checkpoint.physical_hash))
        for folder in (*layout.OBJECT_FOLDERS, layout.SIGNATURES):
            for entry in _entries(self.root / folder):
                if f"{folder}/{entry.name}" not in named:
                    remove(entry)
        for folder in (layout.REFS, layout.INFO):
            for entry in _entries(self.root / folder):
                if entry.name.startswith(layout.TMP_PREFIX):
                    remove(entry)


def data_slice_of(hashes: SliceHashes) -> DataSlice:
    """What a block records of a slice ``odf_slice.write_slice`` wrote (one with records)."""
    if hashes.offsets is None:
        raise AppendError("a slice without records is no new data; append the event without it")
    return DataSlice(logical_hash=hashes.logical, physical_hash=hashes.physical,
                     offset_interval=hashes.offsets, size=hashes.size)


def checkpoint_of(path: Path) -> Checkpoint:
    """What a block records of a checkpoint file: the SHA3-256 of its bytes and its size."""
    return Checkpoint(physical_hash=Multihash(SHA3_256, physical_hash(path)), size=path.stat().st_size)


def _entries(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []

