"""A workspace's ODF 0.18 dataset written as a current-ODF (0.39) dataset folder in the
reference's layout: ``coord upgrade`` (``schemas/ODF-039.md``, "Upgrading a 0.18 dataset").

The new chain, each block through the one append path (``append.DatasetWriter``):

    Seed                  did:odf of a key derived from the workspace's key and the name
    SetPollingSource      a root's 0.18 source (``odf39.from_odf18``), again where 0.18 changed it;
                          none for a File Feed (``store.feed_source``)
    SetTransform          a derivative's: each input by the did:odf of its upgrade, aliased by name
    SetVocab              when the 0.18 vocabulary names the columns otherwise
    SetDataSchema         the stored table's schema, before the first data and where it grows
    AddData               a root's, one per 0.18 block that added data or moved the watermark
    ExecuteTransform      a derivative's, one per 0.18 step that changed something
    SetAttachments        ``ORIGIN_PATH``: the 0.18 head and which 0.18 block became which

Invariants:

- A slice is the 0.18 slice's records (its system time column left out; event time and data
  columns as stored) put through ``odf_slice.build_slice`` at the 0.18 block's system time,
  offsets counting on from the previous slice. A snapshot root's observed rows become the
  operation types its 0.39 merge writes (``merge.observed_as_operations``): ``I`` an append,
  ``U`` a correct-from of the key's values in the projection of the slices before (event
  time included) then a correct-to of the row, ``D`` a retraction of those values (the 0.18
  row has the snapshot's time instead); the observed column goes, and the slice is in its
  merge's order (by key, then operation type). Fed the same snapshots, a
  0.39 root writes the same records, but where only a row's own event time changed: 0.39
  compares it, 0.18 did not, so there is no ``U`` to upgrade; the watermark is the 0.18 watermark in force
  after that block; a root's source state is the 0.18 fetch state where the reference has a
  kind for it (an ETag or a Last-Modified time of a URL), a File Feed's update in coord's own
  kind (as a 0.39 feed root records it), none otherwise.
- A File Feed root's chain holds no source (a 0.39 workspace keeps it beside the chain, which
  the folder has not): a workspace that takes the folder is given it by adding the root's
  manifest again, and goes on from the updates its blocks record. A root whose source changes
  between a File Feed and another fetch is refused.
- A derivative is written after its inputs (``upgrade_order``), from their folders in the same
  ``into``: a step's input is the upgraded block of the newest 0.18 input block the step
  consumed that the input's origin attachment maps, with the offset that block ends at; a 0.18
  checkpoint folder becomes one file (``checkpoint.pack_checkpoint``), carried on where a step made none.
- Blocks keep the 0.18 system times, so the upgrade of the same chain with the same key is the
  same chain, byte for byte. Every hash changes from the 0.18 ones: the origin attachment maps
  them.
- All or nothing: the folder is written under a temporary name beside the target, verified
  (``verify.verify_folder``), and only then renamed to ``<into>/<name>``; a target that exists
  is refused before anything is written.
- Refused in one line (``UpgradeError`` or ``NoCounterpart``): a snapshot merge's primary
  key, a vocabulary or a derivative's inputs that change along the chain, an input not
  upgraded in ``into`` (or upgraded before the blocks a step read), a definition with no 0.39
  counterpart; a ``U`` or ``D`` row of a key the slices before it do not hold.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..data.odf_schema import data_schema
from ..data.odf_slice import Vocabulary, build_slice, write_slice
from ..errors import Conflict, CoordError
from ..ingest.errors import IngestError
from ..ingest.merge import SnapshotColumns, observed_as_operations, projection
from ..metadata.did import DatasetId
from ..metadata.multiformats import Multihash
from ..metadata.objects import (
    DatasetSourceDerivative,
    DatasetSourceRoot,
    MergeStrategySnapshot,
    MetadataBlock,
)
from ..metadata.odf39 import data as d
from ..metadata.odf39 import events as e
from ..metadata.odf39.from_odf18 import NoCounterpart, polling_source, set_transform, set_vocab
from ..metadata.odf39.source import SourceState
from ..store import layout
from ..store.append import DatasetWriter, checkpoint_of, data_slice_of
from ..store.checkpoint import pack_checkpoint
from ..store.dataset import dataset_key_purpose
from ..store.feed_source import is_feed
from ..store.read import DatasetState, read_state
from ..store.source_state import reference_source_state
from ..store.verify import verify_folder
from ..transform.builds import builds
from ..workspace.source_state import SourceState as FetchState

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..workspace.dataset import Dataset
    from ..workspace.state import DatasetState as State018
    from ..workspace.workspace import Workspace

ORIGIN_PATH = "coord/odf-0.18-origin.json"  # the attachment that says where the chain came from


class UpgradeError(CoordError):
    """A 0.18 dataset not upgraded; nothing was written."""


class TargetExists(UpgradeError, Conflict):
    """The folder the dataset would be written to is there already."""


@dataclass(frozen=True)
class Upgraded:
    """A 0.18 dataset written as a 0.39 folder, as read back from it."""

    name: str
    root: Path  # <into>/<name>
    state: DatasetState
    origin: tuple[tuple[bytes, Multihash], ...]  # (0.18 block, the 0.39 block made of it)
    feed: bool = False  # a File Feed root: its source is not in the folder (module doc)

    @property
    def records(self) -> int:
        return sum(s.slice.offset_interval.end - s.slice.offset_interval.start + 1
                   for s in self.state.slices)


def upgrade_dataset(ws: Workspace, name: str, into: Path) -> Upgraded:
    """Write the 0.18 dataset ``name`` of ``ws`` as the 0.39 dataset ``<into>/<name>``; a
    derivative's inputs must be upgraded in ``into`` already (``upgrade_order``)."""
    ds = ws.dataset(name)
    old = ds.state()
    _check_upgradable(old, name)
    target = into / name
    if target.exists():
        raise TargetExists(f"{target} exists; upgrade into another folder, or remove it first")
    inputs = _inputs(ws, old, into)
    into.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=layout.TMP_PREFIX + name + "-", dir=into))
    try:
        folder = staging / name
        with DatasetWriter(folder, staging / "writer.lock") as w:
            origin = _Writer(ds, old, folder, inputs).write(
                w, ws.signing_key.derive(dataset_key_purpose(name)))
        problems = verify_folder(folder)
        if problems:
            raise UpgradeError(f"{name}: the written folder does not verify, so it was not "
                               f"kept: {problems[0]}")
        if target.exists():  # made while this one was written
            raise TargetExists(f"{target} exists; upgrade into another folder, or remove it "
                               "first")
        os.rename(folder, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    state = read_state(target)
    assert state is not None, "the folder was verified with its blocks"
    return Upgraded(name, target, state, origin, is_feed(old.source))


def upgrade_order(ws: Workspace, names: list[str], into: Path, recursive: bool) -> list[str]:
    """``names`` in the order to upgrade them, inputs first; with ``recursive``, preceded by
    the inputs they read (at any depth) that ``into`` does not hold yet."""
    order: dict[str, None] = {}

    def visit(name: str, asked: bool) -> None:
        if name in order or (not asked and (into / name).exists()):
            return
        if recursive:
            source = ws.dataset(name).state().source
            for upstream in getattr(source, "inputs", ()):
                visit(upstream, asked=False)
        order[name] = None

    for name in names:
        visit(name, asked=True)
    return list(order)


def _check_upgradable(old: State018, name: str) -> None:
    sources = [cb.block.source for cb in old.chain if cb.block.source is not None]
    if len({tuple(m.primary_key) for m in _snapshot_merges(old)}) > 1:
        raise UpgradeError(f"{name}: its snapshot merge's primary key changes along the chain; "
                           "coord upgrade rewrites observed rows against one key")
    if len({tuple(s.inputs) for s in sources if isinstance(s, DatasetSourceDerivative)}) > 1:
        raise UpgradeError(f"{name}: its inputs change along the chain; coord upgrade writes "
                           "derivatives that keep their inputs")
    feeds = {is_feed(s) for s in sources if isinstance(s, DatasetSourceRoot)}
    if len(feeds) > 1:
        raise UpgradeError(f"{name}: its source changes between a File Feed and another fetch "
                           "along the chain, which a 0.39 chain cannot say (it ends no polling "
                           "source); upgrade a dataset that keeps one of them (coord reset to a block "
                           "before the change, or the feed added under another name)")
    vocabs = {cb.block.vocab for cb in old.chain if cb.block.vocab is not None}
    if len(vocabs) > 1:
        raise UpgradeError(f"{name}: its vocabulary changes along the chain; a 0.39 dataset "
                           "names its system columns once")


def _snapshot_merges(old: State018) -> list[MergeStrategySnapshot]:
    """The snapshot merges a root's chain defines, oldest first."""
    return [cb.block.source.merge for cb in reversed(old.chain)
            if isinstance(cb.block.source, DatasetSourceRoot)
            and isinstance(cb.block.source.merge, MergeStrategySnapshot)]


@dataclass(frozen=True)
class _Input:
    """An upgraded input of a derivative, as its folder says (its origin attachment)."""

    name: str
    id: DatasetId
    blocks: dict[bytes, tuple[Multihash, int | None]]  # 0.18 block -> 0.39 block, last offset
    covered: frozenset[bytes]  # the 0.18 blocks up to the head it was upgraded from


def _inputs(ws: Workspace, old: State018, into: Path) -> dict[str, _Input]:
    if not isinstance(old.source, DatasetSourceDerivative):
        return {}
    found = {}
    for name in old.source.inputs:
        folder = into / name
        state = read_state(folder) if folder.is_dir() else None
        if state is None:
            raise UpgradeError(f"{old.id} reads {name}, which is not upgraded in {into}; "
                               "upgrade it first (or give -r)")
        origin = _origin_of(state, folder, name)
        ends = {r.sequence_number: r.slice.offset_interval.end for r in state.slices}
        offsets: dict[str, int | None] = {}
        last: int | None = None
        for stored in state.blocks:  # oldest first: the last offset as of each block
            last = ends.get(stored.block.sequence_number, last)
            offsets[str(stored.hash)] = last
        blocks = {bytes.fromhex(m["odf018"]): (Multihash.parse(m["odf039"]), offsets[m["odf039"]])
                  for m in origin["blocks"]}
        head, now = bytes.fromhex(origin["upgradedFrom"]["head"]), ws.dataset(name).state()
        if head not in now.hashes:
            raise UpgradeError(f"{folder} was upgraded from a chain of {name} this workspace no "
                               "longer holds; upgrade it again into an empty folder")
        found[name] = _Input(name, state.id, blocks, now.up_to(head).hashes)
    return found


def _origin_of(state: DatasetState, folder: Path, name: str) -> dict:
    """The origin attachment of an upgraded dataset (refused when it is not ``name``'s)."""
    for stored in reversed(state.blocks):
        event = stored.block.event
        if isinstance(event, e.SetAttachments):
            for item in event.attachments.items:
                if item.path == ORIGIN_PATH:
                    origin = json.loads(item.content)
                    if origin["upgradedFrom"]["dataset"] == name:
                        return origin
    raise UpgradeError(f"{folder} is no upgrade of the 0.18 dataset {name} (no {ORIGIN_PATH} "
                       "naming it); upgrade it into an empty folder")


class _Writer:
    """The new chain of one 0.18 dataset, appended block by block (see the module doc)."""

    def __init__(self, ds: Dataset, old: State018, folder: Path, inputs: dict[str, _Input]):
        self.ds, self.old, self.folder, self.inputs = ds, old, folder, inputs
        vocab = old.vocab
        self.vocab = Vocabulary(system_time=vocab.system_time, event_time=vocab.event_time)
        self.schema: d.DataSchema | None = None
        self.runs = {b.block_hash: b for b in builds(ds.ws, ds)} if inputs else {}
        self.query_inputs = [e.ExecuteTransformInput(dataset_id=i.id) for i in inputs.values()]
        self.packed: dict[Multihash, Path] = {}  # checkpoints packed, by physical hash
        # a snapshot root's: the merge's roles, and the projection of the slices written so far
        merges = _snapshot_merges(old)
        self.roles = SnapshotColumns.of(merges[0]) if merges else None
        self.state: pa.Table | None = None

    def write(self, w: DatasetWriter, key: Ed25519PrivateKey) -> tuple[tuple[bytes, Multihash], ...]:
        """Append the new chain; returns which 0.18 block became which 0.39 one."""
        blocks = list(reversed(self.old.chain))  # oldest first
        kind = e.DatasetKind.DERIVATIVE if self.inputs else e.DatasetKind.ROOT
        w.seed(key, kind, blocks[0].block.system_time, alias=self.ds.id)
        origin: list[tuple[bytes, Multihash]] = []
        watermark = prev_offset = checkpoint = None
        for cb in blocks:
            b, when = cb.block, cb.block.system_time
            self._definition(w, b, when, first=cb is blocks[0])
            new_watermark = b.output_watermark or watermark
            new_data, path = self._slice(w, cb.hash, b, prev_offset)
            event: e.AddData | e.ExecuteTransform
            if cb.hash in self.runs:
                query_inputs = self._query_inputs(cb.hash)
                new_checkpoint = self._checkpoint(cb.hash) or checkpoint
                moved = query_inputs != self.query_inputs or new_checkpoint != checkpoint
                event = e.ExecuteTransform(
                    query_inputs=query_inputs,
                    prev_checkpoint=checkpoint.physical_hash if checkpoint else None,
                    prev_offset=prev_offset, new_data=new_data, new_checkpoint=new_checkpoint,
                    new_watermark=new_watermark)
            else:
                moved = False
                event = e.AddData(prev_offset=prev_offset, new_data=new_data,
                                  new_watermark=new_watermark,
                                  new_source_state=_source_state(self.ds, self.old, cb.hash))
            if new_data is None and new_watermark == watermark and not moved:
                continue
            fresh = event.new_checkpoint is not None and event.new_checkpoint != checkpoint
            packed = self.packed[event.new_checkpoint.physical_hash] if fresh else None  # type: ignore[union-attr]
            origin.append((cb.hash, w.append(event, system_time=when, data=path, checkpoint=packed)))
            watermark = new_watermark
            if new_data is not None:
                prev_offset = new_data.offset_interval.end
            if isinstance(event, e.ExecuteTransform):
                self.query_inputs, checkpoint = event.query_inputs, event.new_checkpoint
        w.append(_origin_attachment(self.ds.id, self.old.head, origin),
                 system_time=blocks[-1].block.system_time)
        return tuple(origin)

    def _definition(self, w: DatasetWriter, b: MetadataBlock, when: datetime, first: bool) -> None:
        """The source a 0.18 block sets, and after the first one the vocabulary."""
        at = f"{self.ds.id}: source"
        if isinstance(b.source, DatasetSourceRoot):
            if not is_feed(b.source):  # a File Feed's source is kept beside the chain
                w.append(e.normalized(polling_source(b.source, at)), system_time=when)
        elif isinstance(b.source, DatasetSourceDerivative):
            if b.source.transform.late_rows is not None:
                raise NoCounterpart(f"{at}.transform.lateRows", "lateRows (a coord extension)",
                                    "a 0.39 transform has no place for it: add the manifest "
                                    "without it (coord add --replace) to upgrade, then with it "
                                    "where the upgraded derivative is")
            ids = {name: i.id for name, i in self.inputs.items()}
            w.append(e.normalized(set_transform(b.source, ids, at)), system_time=when)
        if first and (v := set_vocab(self.old.vocab)) is not None:
            w.append(v, system_time=when)

    def _slice(self, w: DatasetWriter, h: bytes, b: MetadataBlock,
               prev_offset: int | None) -> tuple[e.DataSlice | None, Path | None]:
        """The 0.39 slice of a 0.18 block's records (written beside the folder), after a
        SetDataSchema when its schema is new; (None, None) for a block without records."""
        if b.output_slice is None or not b.output_slice.num_records:
            return None, None
        table = pq.read_table(self.ds.data_file(h)).drop_columns([self.vocab.system_time])
        if self.roles is not None:
            table = self._operations(table, h)
        stored = build_slice(table, system_time=b.system_time, prev_offset=prev_offset,
                             vocabulary=self.vocab,
                             key=self.roles.key if self.roles is not None else ())
        if self.schema != (schema := data_schema(stored.schema)):
            w.append(e.SetDataSchema(schema=schema), system_time=b.system_time)
            self.schema = schema
        path = self.folder.parent / f"slice-{h.hex()}.parquet"
        return data_slice_of(write_slice(stored, path, self.vocab)), path

    def _operations(self, table: pa.Table, h: bytes) -> pa.Table:
        """A snapshot root's slice with its observed rows as operation types (against the
        projection of the slices before it, which then takes this one in)."""
        assert self.roles is not None
        at = f"{self.ds.id}: block {h.hex()}"
        records = table
        if self.roles.observation in table.column_names:
            try:
                records = observed_as_operations(self.state, table, self.roles,
                                                 self.vocab.operation_type, at)
            except IngestError as problem:
                raise UpgradeError(f"{problem}; the 0.18 chain is not a snapshot history coord "
                                   "can rewrite") from None
        parts = [table] if self.state is None else [self.state, table]
        self.state = projection(pa.concat_tables(parts, promote_options="permissive"), self.roles)
        return records

    def _query_inputs(self, h: bytes) -> list[e.ExecuteTransformInput]:
        """Per input, the upgraded blocks and offsets the 0.18 step consumed, carrying on from
        the previous step."""
        out = []
        for use, before in zip(self.runs[h].inputs, self.query_inputs, strict=True):
            upgraded = self.inputs[use.dataset_id]
            missing = [c for c in use.blocks if c not in upgraded.covered]
            if missing:
                raise UpgradeError(f"{self.ds.id} read block {missing[0].hex()} of "
                                   f"{use.dataset_id}, which its upgrade does not hold; upgrade "
                                   f"{use.dataset_id} again into an empty folder")
            last_block = before.new_block_hash or before.prev_block_hash
            last_offset = before.new_offset if before.new_offset is not None else before.prev_offset
            mapped = [upgraded.blocks[c] for c in use.blocks if c in upgraded.blocks]
            new_block, new_offset = mapped[-1] if mapped else (None, None)
            if new_block == last_block:
                new_block, new_offset = None, None
            out.append(e.ExecuteTransformInput(
                dataset_id=upgraded.id, prev_block_hash=last_block, new_block_hash=new_block,
                prev_offset=last_offset,
                new_offset=None if new_offset == last_offset else new_offset))
        return out

    def _checkpoint(self, h: bytes) -> e.Checkpoint | None:
        """The 0.18 step's checkpoint folder packed as one file (``pack_checkpoint``)."""
        folder = self.ds.checkpoint_dir(h)
        if not folder.is_dir():
            return None
        path = self.folder.parent / f"checkpoint-{h.hex()}.tar"
        pack_checkpoint(folder, path)
        packed = checkpoint_of(path)
        self.packed[packed.physical_hash] = path
        return packed


def _source_state(ds: Dataset, old: State018, block: bytes) -> SourceState | None:
    """The 0.39 source state of the fetch state a 0.18 block stored (``source_state``)."""
    if block not in old.fetch_states:
        return None
    path = ds.state_path(block)
    return reference_source_state(FetchState.from_json(path.read_bytes(), where=f"{ds.id}: {path}"))


def _origin_attachment(name: str, head: bytes,
                       origin: list[tuple[bytes, Multihash]]) -> e.SetAttachments:
    content = {
        "upgradedFrom": {"odf": "0.18", "dataset": name, "head": head.hex()},
        "blocks": [{"odf018": old.hex(), "odf039": str(new)} for old, new in origin],
    }
    text = json.dumps(content, indent=2, sort_keys=True) + "\n"
    return e.SetAttachments(attachments=e.AttachmentsEmbedded(
        items=[e.AttachmentEmbedded(path=ORIGIN_PATH, content=text)]))

