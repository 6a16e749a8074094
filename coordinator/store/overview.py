"""A dataset of either ODF version as the reading commands show it, and the current-ODF
datasets of a workspace read once per command.

``coord list``, ``coord status`` and ``coord lineage`` ask the same few things of every dataset
(kind, blocks, records, watermark, last update, where its data comes from); the two versions
differ only in how their chains are read. ``Overview`` is that small read model, filled once
from a 0.18 ``workspace.DatasetState`` (``of_odf18``) or a 0.39 ``store.read.DatasetState``
(``CurrentDatasets.overview``), so the commands do not branch per version.

Invariants:

- ``CurrentDatasets`` reads each 0.39 dataset's chain at most once per command (one object per
  command, as ``DatasetGraph`` for 0.18 chains); it is also what a derivative's pull and
  replay resolve their inputs with.
- A derivative's input (``SetTransform.inputs[].datasetRef``) is a workspace dataset when the
  ref is the ``did:odf`` of one of its 0.39 datasets; otherwise the ref is kept as written, and
  the graph shows it as missing. (The chain rules take only a ``did:odf`` in a stored
  ``SetTransform``; a ref that is none would be taken as a name.)
- A 0.39 root fed by a File Feed shows the feed's URL as its origin, from the source kept
  beside its chain (``feed_source``), as a 0.18 feed root shows it.
- A 0.39 dataset's records are the offsets its slices cover (``end - start + 1`` each): what
  the blocks say, no data file is opened, and Arrow is not imported.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound
from ..metadata.ids import MAX_ID_LENGTH, is_dataset_id
from ..metadata.objects import (
    DatasetSourceDerivative,
    DatasetSourceRoot,
    FetchStep,
    FetchStepContainer,
    FetchStepFilesGlob,
)
from ..metadata.odf39.events import DatasetKind
from ..workspace import layout as ws_layout
from ..workspace.config import OdfVersion
from ..workspace.dataset import DatasetNotFound
from .dataset import CurrentDataset
from .read import DatasetState, StoreError, read_state

if TYPE_CHECKING:
    from ..metadata.odf39.events import TransformInput
    from ..workspace import Workspace
    from ..workspace.state import DatasetState as Odf18State


@dataclass(frozen=True)
class Overview:
    """What the reading commands show of one dataset, whatever its ODF version."""

    id: str  # its name in the workspace
    odf: OdfVersion
    kind: str  # root | derivative
    head: str | None  # 0.18: the block hash in hex; 0.39: its multihash (f1620...)
    num_blocks: int
    num_records: int
    watermark: datetime | None
    last_updated: datetime  # the head's system time
    origin: str | None  # roots: where the data is fetched from; derivatives: the engine


def fetch_location(fetch: FetchStep) -> str:
    """Where a root's data comes from: a glob's path, a container's image, any other fetch
    step's URL."""
    if isinstance(fetch, FetchStepContainer):
        return f"container {fetch.image}"
    return fetch.path if isinstance(fetch, FetchStepFilesGlob) else fetch.url


def of_odf18(state: Odf18State) -> Overview:
    source = state.source
    if isinstance(source, DatasetSourceRoot):
        origin = fetch_location(source.fetch)
    else:
        origin = source.transform.engine if isinstance(source, DatasetSourceDerivative) else None
    return Overview(state.id, OdfVersion.V018, state.kind, state.head.hex(), state.num_blocks,
                    state.num_records, state.watermark, state.last_updated, origin)


def num_records(state: DatasetState) -> int:
    return sum(r.slice.offset_interval.end - r.slice.offset_interval.start + 1 for r in state.slices)


def origin_of(state: DatasetState, kept: DatasetSourceRoot | None = None) -> str | None:
    """Where a 0.39 dataset's data comes from; ``kept``: the File Feed source kept beside a
    root's chain, which holds none (``CurrentDatasets.kept_feed``)."""
    if state.transform is not None:
        return state.transform.transform.engine
    if state.polling_source is not None:
        fetch = state.polling_source.fetch
        return getattr(fetch, "url", None) or getattr(fetch, "path", None) or getattr(fetch, "image", None)
    if state.push_sources:
        return "push source " + ", ".join(s.source_name for s in state.push_sources)
    return None if kept is None else fetch_location(kept.fetch)


class CurrentDatasets:
    """The 0.39 datasets of ``ws`` as one command reads them (each chain once)."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._states: dict[str, DatasetState] = {}
        self._by_did: dict[str, str] | None = None

    def holds(self, name: str) -> bool:
        return self.ws.odf_of(name) is OdfVersion.V039

    def state(self, name: str) -> DatasetState:
        if name not in self._states:
            # ``read_state`` as ``CurrentDataset.state`` does, without the writer's modules (they
            # bring Arrow, which status and list do not import)
            state = read_state(self.ws.meta / ws_layout.dataset_dir(name))
            if state is None:
                raise DatasetNotFound(name)
            self._states[name] = state
        return self._states[name]

    def overview(self, name: str) -> Overview:
        s = self.state(name)
        kind = "derivative" if s.kind is DatasetKind.DERIVATIVE else "root"
        return Overview(name, OdfVersion.V039, kind, str(s.head), len(s.blocks), num_records(s),
                        s.watermark, s.blocks[-1].block.system_time, origin_of(s, self.kept_feed(name)))

    def kept_feed(self, name: str) -> DatasetSourceRoot | None:
        """The File Feed source kept beside the chain of the root ``name`` when its chain holds
        no source (``feed_source``); None too when the kept file is damaged (its pull says so)."""
        s = self.state(name)
        if s.kind is not DatasetKind.ROOT or s.polling_source is not None or s.push_sources:
            return None
        from .feed_source import KeptFeedError, kept_feed_source

        try:
            return kept_feed_source(self.ws, name)
        except KeptFeedError:
            return None

    def _id_of(self, name: str) -> str | None:
        """The ``did:odf`` of the 0.39 dataset ``name`` (None: none, or its chain cannot be
        read: it is no input of anyone until it can, and its own commands say why)."""
        if len(name) > MAX_ID_LENGTH or not is_dataset_id(name) or not self.holds(name):
            return None  # an alias is the chain's text, not yet a name
        try:
            return str(self.state(name).id)
        except StoreError:
            return None

    def name_of(self, ref: str, alias: str | None = None) -> str:
        """The workspace dataset a ``datasetRef`` names (see the module doc), else ``ref``:
        looked for under the input's ``alias`` first (the usual case: the alias is the
        input's name), then among every 0.39 dataset of the workspace."""
        if not ref.startswith("did:"):
            return ref
        if alias and self._id_of(alias) == ref:
            return alias
        if self._by_did is None:
            self._by_did = {}
            for ds in self.ws.datasets():
                if (did := self._id_of(ds.id)) is not None:
                    self._by_did.setdefault(did, ds.id)
        return self._by_did.get(ref, ref)

    def inputs(self, name: str) -> tuple[str, ...]:
        """The workspace names of the inputs of the dataset's ``SetTransform`` in force."""
        transform = self.state(name).transform
        return tuple(self.name_of(i.dataset_ref, i.alias) for i in transform.inputs) if transform else ()

    def input_dataset(self, given: TransformInput, reader: str) -> CurrentDataset:
        """The dataset an input of ``reader`` names; ``InputNotFound`` when the workspace has none."""
        name = self.name_of(given.dataset_ref, given.alias)
        if self._id_of(name) != given.dataset_ref:
            raise InputNotFound(f"{reader} reads {given.dataset_ref} (as {given.alias}), which "
                                "no current-ODF dataset of this workspace is; pull it first")
        return CurrentDataset(self.ws, name)


class InputNotFound(NotFound):
    """A derivative's input (a ``did:odf``) that no current-ODF dataset of the workspace is."""


def overview(ws: Workspace, name: str, current: CurrentDatasets, odf18: Odf18State | None = None) -> Overview:
    """The dataset's overview; ``odf18``: its 0.18 state when the caller has read it already."""
    if current.holds(name):
        return current.overview(name)
    return of_odf18(odf18 if odf18 is not None else ws.dataset(name).state())
