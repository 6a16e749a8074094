"""A current-ODF (0.39) dataset's definition, as ``coord add`` writes it in a workspace whose
new datasets are 0.39 (``workspace.catalog`` decides which version; this writes the 0.39 one).

A new dataset's chain starts:

    Seed              did:odf of a fresh key (``new_dataset_key``), alias = its name
    SetPollingSource  a root's source        | SetTransform  a derivative's, each input by
    or AddPushSource  (each, as written;     |               its did:odf, aliased by its name
                      none for a File Feed)  |
    SetVocab          when not the defaults  |
    SetInfo / SetLicense / SetAttachments    what a reference-form manifest carries

Invariants:

- A reference-form manifest (``{kind: DatasetSnapshot, version: 1, ...}``) gives its 0.39 events
  as written, in its order; only a SetTransform's inputs, which it names by dataset name (or
  ``account/name``: the workspace's ``name``), are written as ``{datasetRef: <did:odf>,
  alias: <its alias, else the name>}``. A 0.18-form manifest's definition is
  converted (``odf39.from_odf18``), refusing what 0.39 cannot say.
- An input's did:odf is its Seed's when it exists (a pulled dataset's is its author's), else
  that of the fresh key this command made for it, so it is known before the input is written
  (a batch adds inputs first, with the same key).
- Transforms are stored normalized (``events.normalized``: a single ``query`` becomes
  ``queries: [{query}]``), as the spec says and the reference's pull requires; a chain written
  before that, with ``query``, is compared in that form, so adding its manifest again changes
  nothing.
- ``--replace`` appends what differs from the definition in force (source, vocabulary, each
  descriptive event's newest); nothing differs, no block.
- A derivative's ``transform.lateRows`` (``correct`` when the manifest names none) is kept
  beside the chain (``store.late_rows``), by ``--replace`` too. A root stays a root. The caller's
  ``check_change`` may refuse it first (``build.schema_change``: a schema the records cannot keep).
- A new dataset's chain is written in a run folder and renamed into place: it appears whole
  (Seed and definition) or not at all; a killed ``coord add`` leaves only an abandoned run folder.
- A root whose fetch is ``fileFeed`` (which 0.39 cannot say; a current-form manifest names it
  as coord's extension, ``FileFeed``) has no source event: its source
  is kept beside the chain (``store.feed_source``), by ``--replace`` too, before its chain is
  written; a root defined with another source drops the kept one. A root whose chain has a
  polling source cannot become a File Feed root (the reference refuses DisablePollingSource).
- A snapshot merge is defined as any other (its pulls write retractions and corrections,
  ``ingest.current``; ``coord upgrade`` rewrites a 0.18 snapshot root's observed rows as them).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..metadata.did import DatasetId
from ..metadata.multiformats import Multihash
from ..metadata.objects import DatasetSnapshot, DatasetSourceDerivative, DatasetSourceRoot
from ..metadata.odf39 import events as e
from ..metadata.odf39.adapt import local_name
from ..metadata.odf39.from_odf18 import polling_source, set_transform, set_vocab
from ..metadata.timestamps import now_utc
from ..workspace.catalog import AddAction, AddResult, CatalogConflict
from ..workspace.fsutil import fsync_dir, remove
from ..workspace.runs import run_folder
from ..workspace.workspace import Workspace
from .append import DatasetWriter
from .dataset import CurrentDataset, new_dataset_key
from .feed_source import is_feed, keep_feed_source
from .late_rows import NEW_DERIVATIVE_DEFAULT, keep_late_rows_policy
from .overview import CurrentDatasets
from .read import DatasetState

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

DESCRIPTIVE = (e.SetInfo, e.SetLicense, e.SetAttachments)

# vets the changed events of an existing dataset (its name, its chain) and raises to refuse them
ChangeCheck = Callable[[str, DatasetState, list[e.MetadataEvent]], None]


class Definitions:
    """``catalog.CurrentDefinitions`` for ``ws``; ``written``: the 0.39 snapshots of the
    reference-form manifests being added, by dataset name."""

    def __init__(self, ws: Workspace, written: Mapping[str, e.DatasetSnapshot] | None = None,
                 check_change: ChangeCheck | None = None):
        self.ws = ws
        self.written = dict(written or {})
        self.check_change = check_change
        self._new_keys: dict[str, Ed25519PrivateKey] = {}  # of datasets this command creates

    def did(self, name: str) -> DatasetId:
        """The id of the 0.39 dataset ``name``: its Seed's when it exists (a pulled dataset's
        is its author's), else the one it will have (added in the same run)."""
        ds = CurrentDataset(self.ws, name)
        return ds.state().id if ds.exists() else DatasetId.from_public_key(self._new_key(name))

    def _new_key(self, name: str) -> Ed25519PrivateKey:
        if name not in self._new_keys:
            self._new_keys[name] = new_dataset_key()
        return self._new_keys[name]

    def check(self, snapshot: DatasetSnapshot) -> None:
        self.events(snapshot)

    def events(self, snapshot: DatasetSnapshot) -> list[e.MetadataEvent]:
        """The definition's events, in the order a new chain holds them after its Seed."""
        source = snapshot.source
        written = self.written.get(snapshot.id)
        if written is not None:  # a File Feed's SetPollingSource is kept beside the chain
            return [e.normalized(self._resolved(event)) for event in written.metadata
                    if not (is_feed(source) and isinstance(event, e.SetPollingSource))]
        assert source is not None  # only a reference-form manifest gives push sources
        at = f"{snapshot.id}: source"
        if isinstance(source, DatasetSourceRoot):
            events: list[e.MetadataEvent] = [] if is_feed(source) else [polling_source(source, at)]
        else:
            events = [set_transform(source, {i: self.did(i) for i in source.inputs}, at)]
        vocab = set_vocab(snapshot.vocab)
        return [e.normalized(event) for event in events] + ([vocab] if vocab is not None else [])

    def _resolved(self, event: e.MetadataEvent) -> e.MetadataEvent:
        """A written event, its SetTransform inputs named by did:odf (adapt has checked that
        each is a dataset name or ``account/name``); the query reads each by its alias."""
        if not isinstance(event, e.SetTransform):
            return event
        inputs = [e.TransformInput(dataset_ref=str(self.did(local_name(i.dataset_ref))),
                                   alias=i.alias or local_name(i.dataset_ref))
                  for i in event.inputs]
        return dataclasses.replace(event, inputs=inputs)

    def add(self, snapshot: DatasetSnapshot) -> AddResult:
        ds = CurrentDataset(self.ws, snapshot.id)
        events = self.events(snapshot)
        kind = e.DatasetKind.DERIVATIVE if isinstance(snapshot.source, DatasetSourceDerivative) \
            else e.DatasetKind.ROOT
        with ds.writer() as w:
            current = w.state
            if current is not None and current.kind is not kind:
                raise CatalogConflict(f"dataset {ds.id}: cannot turn a {current.kind.name.lower()} "
                                      "dataset into another kind")
            policy = (snapshot.source.transform.late_rows or NEW_DERIVATIVE_DEFAULT
                      if isinstance(snapshot.source, DatasetSourceDerivative) else None)
            feed = snapshot.source if is_feed(snapshot.source) else None
            if current is None:
                # before the chain: a crash between the two leaves a policy (or a feed source)
                # with no dataset, never a new dataset without the one its manifest gives
                if policy is not None:
                    keep_late_rows_policy(self.ws, ds.id, policy)
                if kind is e.DatasetKind.ROOT:
                    keep_feed_source(self.ws, ds.id, feed)
                return AddResult(ds.id, AddAction.ADDED, self._create(ds, kind, events).digest)
            if feed is not None and current.polling_source is not None:
                raise CatalogConflict(f"dataset {ds.id}: its chain has a polling source, which "
                                      "ODF 0.39 cannot end, so a File Feed cannot replace it; add "
                                      "the feed as a new dataset (another name, or coord delete "
                                      f"{ds.id} first)")
            changed = [event for event in events if _differs(event, current)]
            if changed and self.check_change is not None:
                self.check_change(ds.id, current, changed)  # a refused definition keeps its policy too
            policy_changed = policy is not None and keep_late_rows_policy(self.ws, ds.id, policy)
            kept_changed = kind is e.DatasetKind.ROOT and keep_feed_source(self.ws, ds.id, feed)
            if not changed:
                return (AddResult(ds.id, AddAction.UPDATED, current.head.digest)
                        if policy_changed or kept_changed else AddResult(ds.id, AddAction.UNCHANGED, None))
            when = _after(current)
            head = [w.append(event, system_time=when) for event in changed][-1]
            return AddResult(ds.id, AddAction.UPDATED, head.digest)

    def _create(self, ds: CurrentDataset, kind: e.DatasetKind,
                events: list[e.MetadataEvent]) -> Multihash:
        """Write the new chain in a run folder, then rename it into place (the caller holds
        the dataset's lock): a dataset appears whole or not at all."""
        with run_folder(self.ws.run_dir, f"add-{ds.id}") as scratch:
            folder = scratch / "dataset"
            with DatasetWriter(folder, scratch / "dataset.lock", signer=self.ws.signing_key) as w:
                when = now_utc()
                w.seed(self._new_key(ds.id), kind, when, alias=ds.id)
                for event in events:  # none for a File Feed root without a vocabulary
                    w.append(event, system_time=when)
                head = w.head
                assert head is not None  # the Seed at least
            if ds.root.exists():
                remove(ds.root)  # a folder without a head: nothing any reader reaches
            os.rename(folder, ds.root)
            fsync_dir(ds.root.parent)
        return head

    def inputs(self, dataset_id: str) -> tuple[str, ...]:
        return CurrentDatasets(self.ws).inputs(dataset_id)


def _differs(event: e.MetadataEvent, state: DatasetState) -> bool:
    """Whether ``event`` (normalized) changes what ``state`` has in force."""
    if isinstance(event, e.SetPollingSource):
        return state.polling_source is None or event != e.normalized(state.polling_source)
    if isinstance(event, e.SetTransform):
        return state.transform is None or event != e.normalized(state.transform)
    if isinstance(event, e.SetVocab):
        return event != state.vocab
    if isinstance(event, e.AddPushSource):
        return event not in [e.normalized(source) for source in state.push_sources]
    newest = next((b.block.event for b in reversed(state.blocks)
                   if type(b.block.event) is type(event)), None)
    return event != newest


def _after(state: DatasetState) -> datetime:
    """Now, or just after the head's system time when the clock is behind it."""
    last = state.blocks[-1].block.system_time
    t = now_utc()
    return t if t > last else last + timedelta(microseconds=1)
