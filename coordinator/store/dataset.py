"""A current-ODF (0.39) dataset of a workspace: the reference's folder at ``.coord/datasets/<name>``.

A workspace holds datasets of both versions side by side (docs/architecture.md, ODF versions):
a folder with ``meta/refs/head`` is an ODF 0.18 dataset (``workspace.dataset.Dataset``), one
with ``refs/head`` a current-ODF one (this class); ``Workspace.odf_of`` tells them apart.

Invariants:

- The folder is exactly a dataset folder of ``store/layout.py`` (what a repository holds and
  the reference reads); what is this workspace's own (the fetch states, caches) lives under
  ``.coord/cache/<name>/`` as for a 0.18 dataset, and one writer at a time holds
  ``.coord/locks/<name>.lock``.
- The dataset's ``did:odf`` is the public key of a key derived from the workspace's signing
  key and the name (``key``), as ``coord upgrade`` derives it: the same workspace and name give
  the same id, and the workspace key never leaves the workspace.
- ``state`` reads the chain in one pass (``read.read_state``); ``writer`` is the one append
  path (``append.DatasetWriter``), signing each block it makes with the workspace's key (the
  key ``trustedKeys`` and the trust policy speak of, as for a 0.18 dataset).
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NotFound
from ..metadata.did import DatasetId
from ..metadata.ids import MAX_ID_LENGTH, is_dataset_id, validate_dataset_id
from ..workspace import layout as ws_layout
from ..workspace.config import OdfVersion
from ..workspace.dataset import DatasetNotFound
from . import layout
from .read import DatasetState, StoreError, read_head, read_state

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..metadata.multiformats import Multihash
    from ..metadata.odf39.events import Checkpoint, DataSlice, TransformInput
    from ..workspace.workspace import Workspace
    from .append import DatasetWriter


def dataset_key_purpose(name: str) -> str:
    """What the workspace key derives a dataset's key for (``SigningKey.derive``)."""
    return f"did:odf dataset {name}"


class CurrentDataset:
    """One current-ODF dataset of ``ws``, named ``name`` (its alias), whether or not it exists."""

    def __init__(self, ws: Workspace, name: str):
        validate_dataset_id(name)
        self.ws = ws
        self.id = name
        self.root = ws.meta / ws_layout.dataset_dir(name)

    # --- paths --------------------------------------------------------------------------------

    def data_file(self, data_slice: DataSlice) -> Path:
        return self.root / layout.data_file(data_slice.physical_hash)

    def checkpoint_file(self, checkpoint: Checkpoint) -> Path:
        return self.root / layout.checkpoint_file(checkpoint.physical_hash)

    @property
    def cache_dir(self) -> Path:
        """This workspace's own files about the dataset (never pushed)."""
        return self.ws.meta / ws_layout.cache_dir(self.id)

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

    @cached_property
    def key(self) -> Ed25519PrivateKey:
        """The key whose public key is the dataset's ``did:odf`` (see the module's invariants)."""
        return self.ws.signing_key.derive(dataset_key_purpose(self.id))

    def writer(self, known: DatasetState | None = None) -> DatasetWriter:
        """The dataset's one writer; ``known``: a state read earlier in this command, taken as
        the writer's if the head has not moved since."""
        from .append import DatasetWriter  # Arrow (file hashes): only for a command that writes

        return DatasetWriter(self.root, self.lock_path, known, signer=self.ws.signing_key)


class InputNotFound(NotFound):
    """A derivative's input (a ``did:odf``) that no current-ODF dataset of the workspace is."""


class CurrentInputs:
    """Which current-ODF datasets of a workspace a derivative's inputs name.

    A ``SetTransform`` input names its dataset by ``did:odf`` (the chain rules refuse any
    other reference) and gives the query's name for it (``alias``). The dataset is looked for
    under the alias first (the usual case: the alias is the input's name), then among every
    current-ODF dataset of the workspace; each dataset's id is read once per instance."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._ids: dict[str, DatasetId | None] = {}

    def _id_of(self, name: str) -> DatasetId | None:
        """The id of the current-ODF dataset ``name`` (None: none, or its chain cannot be read:
        it is no input of anyone until it can, and its own commands report why)."""
        if name not in self._ids:
            found = None
            if self.ws.odf_of(name) is OdfVersion.V039:
                try:
                    found = CurrentDataset(self.ws, name).state().id
                except StoreError:
                    pass
            self._ids[name] = found
        return self._ids[name]

    def find(self, given: TransformInput) -> str | None:
        """The name of the dataset ``given`` names (None: the workspace has none)."""
        wanted = DatasetId.parse(given.dataset_ref)
        if given.alias and _valid_name(given.alias) and self._id_of(given.alias) == wanted:
            return given.alias
        for ds in self.ws.datasets():
            if ds.id != given.alias and self._id_of(ds.id) == wanted:
                return ds.id
        return None

    def dataset(self, given: TransformInput, reader: str) -> CurrentDataset:
        """The dataset ``given`` names; ``InputNotFound`` when the workspace has none."""
        name = self.find(given)
        if name is None:
            raise InputNotFound(f"{reader} reads {given.dataset_ref} (as {given.alias}), which "
                                "no current-ODF dataset of this workspace is; pull it first")
        return CurrentDataset(self.ws, name)

    def names(self, name: str) -> tuple[str, ...]:
        """The inputs of the current-ODF dataset ``name`` by name, for the workspace's graph;
        an input the workspace lacks is given by its alias (the graph reports it missing)."""
        transform = CurrentDataset(self.ws, name).state().transform
        if transform is None:
            return ()
        return tuple(self.find(i) or i.alias or i.dataset_ref for i in transform.inputs)


def _valid_name(name: str) -> bool:
    return len(name) <= MAX_ID_LENGTH and is_dataset_id(name)
