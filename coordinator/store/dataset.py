"""A current-ODF (0.39) dataset of a workspace: the reference's folder at ``.coord/datasets/<name>``.

A workspace holds datasets of both versions side by side (docs/architecture.md, ODF versions):
a folder with ``meta/refs/head`` is an ODF 0.18 dataset (``workspace.dataset.Dataset``), one
with ``refs/head`` a current-ODF one (this class); ``Workspace.odf_of`` tells them apart.

Invariants:

- The folder is exactly a dataset folder of ``store/layout.py`` (what a repository holds and
  the reference reads); what is this workspace's own (the fetch states, caches) lives under
  ``.coord/cache/<name>/`` as for a 0.18 dataset, and one writer at a time holds
  ``.coord/locks/<name>.lock``.
- A new dataset's ``did:odf`` is the public key of a fresh key (``new_dataset_key``), as the
  spec asks (ids are globally unique) and the reference does: a dataset deleted and added again
  under the same name is a new dataset with a new id. The key is used once, for the Seed, and
  not kept: blocks are signed with the workspace's key. (``coord upgrade`` alone derives the id
  from the workspace key and the name, so an upgrade run twice gives the same ids.)
- ``state`` reads the chain in one pass (``read.read_state``); ``writer`` is the one append
  path (``append.DatasetWriter``), signing each block it makes with the workspace's key (the
  key ``trustedKeys`` and the trust policy speak of, as for a 0.18 dataset).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import Invalid
from ..metadata.ids import validate_dataset_id
from ..workspace import layout as ws_layout
from ..workspace.dataset import BlockNotFound, DatasetNotFound
from . import layout
from .read import DatasetState, blocks_named, read_head, read_state

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..metadata.multiformats import Multihash
    from ..metadata.odf39.events import Checkpoint, DataSlice
    from ..workspace.workspace import Workspace
    from .append import DatasetWriter


def dataset_key_purpose(name: str) -> str:
    """What the workspace key derives an upgraded dataset's key for (``SigningKey.derive``)."""
    return f"did:odf dataset {name}"


def new_dataset_key() -> Ed25519PrivateKey:
    """A fresh key for a new dataset's ``did:odf`` (see the module's invariants)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


class CurrentDataset:
    """One current-ODF dataset of ``ws``, named ``name`` (its alias), whether or not it exists."""

    def __init__(self, ws: Workspace, name: str):
        validate_dataset_id(name)
        self.ws = ws
        self.id = name
        self.root = ws.meta / ws_layout.dataset_dir(name)

    # --- paths --------------------------------------------------------------------------------

    def data_file(self, data_slice: DataSlice) -> Path:
        """The file holding the slice's bytes: its original, else, once compacted, its bytes
        rebuilt from its rows (``compaction.slice_files``: the one place that resolves it)."""
        from .compaction import slice_files

        return slice_files(self.root, [data_slice.physical_hash])[0]

    def checkpoint_file(self, checkpoint: Checkpoint) -> Path:
        return self.root / layout.checkpoint_file(checkpoint.physical_hash)

    @property
    def cache_dir(self) -> Path:
        """This workspace's own files about the dataset (never pushed)."""
        return self.ws.meta / ws_layout.cache_dir(self.id)

    @property
    def state_dir(self) -> Path:
        """The fetch states of a root's blocks (``workspace.source_state``), one per block."""
        return self.ws.meta / ws_layout.cache_dir(self.id, ws_layout.STATE)

    def state_path(self, block: Multihash) -> Path:
        """The fetch state committed with ``block`` (written before the head moves to it)."""
        return self.state_dir / f"{block}.json"

    @property
    def lock_path(self) -> Path:
        return self.ws.meta / ws_layout.lock_file(self.id)

    # --- reading ------------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.root / layout.HEAD).exists()

    def head(self) -> Multihash | None:
        return read_head(self.root)

    def state(self) -> DatasetState:
        """The dataset's chain read and checked in one pass (``read.read_state``)."""
        state = read_state(self.root)
        if state is None:
            raise DatasetNotFound(self.id)
        return state

    def alias(self) -> str:
        """``info/alias`` as written (the name, when the folder has none)."""
        try:
            return (self.root / layout.ALIAS).read_text().strip() or self.id
        except FileNotFoundError:
            return self.id

    # --- writing ------------------------------------------------------------------------------

    def writer(self, known: DatasetState | None = None) -> DatasetWriter:
        """The dataset's one writer; ``known``: a state read earlier in this command, taken as
        the writer's if the head has not moved since."""
        from .append import DatasetWriter  # Arrow (file hashes): only for a command that writes

        return DatasetWriter(self.root, self.lock_path, known, signer=self.ws.signing_key)


def reset_current(ws: Workspace, name: str, prefix: str) -> Multihash:
    """``coord reset`` of a current-ODF dataset: its head moved back to the block ``prefix``
    names (multihash or digest hex, a prefix of either)."""
    ds = CurrentDataset(ws, name)
    with ds.writer() as w:
        assert w.state is not None, "an existing dataset has a block"
        found = blocks_named(w.state, prefix)
        if not found:
            raise BlockNotFound(f"no block of {name} starts with {prefix}")
        if len(found) > 1:
            raise Invalid(f"{prefix} matches {len(found)} blocks of {name}; give more digits")
        w.reset(found[0].hash)
        return found[0].hash
