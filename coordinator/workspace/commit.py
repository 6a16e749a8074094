"""The commit protocol (docs/architecture.md, Workspace): one writer per dataset, all or nothing.

Order of a commit, each step durable before the next:
  data file → checkpoint → block → signature → source state → ``refs/head``.
Only the last step makes anything visible; readers follow ``refs/head``. A crash before it
leaves files no chain reaches: the next writer removes them (``recover``) and redoes the
work, so it happens exactly once. ``COORD_CRASH_AT=<step>`` kills the process at a step
(see ``crash.py``), which the tests use to prove this. An OS error (a full disk) while the
writer is held ends as a ``CommitError`` naming the file and the head the dataset stays at.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..errors import CoordError
from ..metadata.block_hash import seal
from ..metadata.objects import MetadataBlock
from .crash import crash_point
from .dataset import Dataset
from .fsutil import TMP_PREFIX, atomic_write, install, remove
from .lock import DatasetLock

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


class DatasetWriter:
    """Holds the dataset's lock; use as a context manager."""

    def __init__(self, ds: Dataset):
        self.ds = ds
        self._lock = DatasetLock(ds.ws.meta / "locks" / f"{ds.id}.lock", ds.id)

    def __enter__(self) -> DatasetWriter:
        self._lock.acquire()
        try:
            self.recover()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if isinstance(exc, OSError):
                self.recover()  # what the step wrote is unreachable: give its space back now
        finally:
            self._lock.release()
        if isinstance(exc, OSError):
            where = f": {exc.filename}" if exc.filename else ""
            at = f"block {self.head.hex()[:12]}" if self.head else "no block"
            raise CommitError(
                f"{exc.strerror or exc}{where}; nothing of this step was committed, {self.ds.id} "
                f"stays at {at}; run the command again once that is fixed"
            ) from exc

    @property
    def head(self) -> bytes | None:
        return self.ds.head()

    # --- commit -----------------------------------------------------------------------------

    def commit(
        self,
        block: MetadataBlock,
        *,
        data_file: Path | None = None,
        checkpoint_dir: Path | None = None,
        source_state: dict | None = None,
    ) -> bytes:
        """Append ``block`` (its ``prev_block_hash`` is set here) and return its hash."""
        head = self.head
        if block.prev_block_hash not in (None, head):
            raise CommitError(f"dataset {self.ds.id} changed while the block was prepared")
        if (data_file is None) != (block.output_slice is None):
            raise CommitError("a block has an output slice exactly when it comes with a data file")
        if head is not None:
            previous = next(self.ds.blocks())[1]
            if block.system_time < previous.system_time:
                raise CommitError("system time of a new block is earlier than the head's")
        sealed = seal(dataclasses.replace(block, prev_block_hash=head))
        h, data = sealed.hash, sealed.stored

        if data_file is not None:
            install(data_file, self.ds.data_file(h))
        crash_point("data-installed")
        if checkpoint_dir is not None:
            install(checkpoint_dir, self.ds.checkpoint_dir(h))
        crash_point("checkpoint-installed")
        atomic_write(self.ds.block_path(h), data)
        crash_point("block-written")
        atomic_write(self.ds.signature_path(h), self.ds.ws.signing_key.sign(h).to_bytes())
        crash_point("signature-written")
        if source_state is not None:
            atomic_write(self.ds.state_path(h), json.dumps(source_state, sort_keys=True).encode())
        crash_point("state-written")
        self.move_head(head, h)
        crash_point("head-updated")
        return h

    def reset(self, to: bytes) -> None:
        """Move the head back to an earlier block of the chain (later blocks are removed)."""
        head = self.head
        if not any(h == to for h, _ in self.ds.blocks()):
            raise CommitError(f"block {to.hex()} is not in the chain of {self.ds.id}")
        self.move_head(head, to)
        self.recover()

    def move_head(self, expected: bytes | None, new: bytes) -> None:
        # We hold the lock, so this compare is a guard against a writer that ignored it.
        if self.head != expected:
            raise CommitError(f"head of {self.ds.id} moved during the commit")
        atomic_write(self.ds.head_path, new.hex().encode() + b"\n")

    # --- recovery ---------------------------------------------------------------------------

    def recover(self) -> None:
        """Remove what an interrupted commit left: temp files and blocks no chain reaches."""
        root = self.ds.root
        for folder in (root / "data", root / "checkpoint", root / "meta" / "blocks",
                       root / "meta" / "signatures", root / "meta" / "refs", self._state_dir()):
            for leftover in folder.glob(f"{TMP_PREFIX}*") if folder.exists() else ():
                remove(leftover)
        reachable = {h.hex() for h, _ in self.ds.blocks()} if self.ds.exists() else set()
        for folder in (root / "meta" / "blocks", root / "meta" / "signatures",
                       root / "data", root / "checkpoint"):
            for entry in folder.iterdir() if folder.exists() else ():
                if entry.name not in reachable:
                    remove(entry)
        state_dir = self._state_dir()
        for entry in state_dir.iterdir() if state_dir.exists() else ():
            if entry.stem not in reachable:
                remove(entry)

    def _state_dir(self) -> Path:
        return self.ds.ws.meta / "cache" / self.ds.id / "state"
