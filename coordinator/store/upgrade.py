"""A workspace's ODF 0.18 root dataset written as a current-ODF (0.39) dataset folder in the
reference's layout: ``coord upgrade`` (``schemas/ODF-039.md``, "Upgrading a 0.18 dataset").

The new chain, each block through the one append path (``append.DatasetWriter``):

    Seed                  did:odf of a key derived from the workspace's key and the name
    SetPollingSource      the 0.18 source (``odf39.from_odf18``), again where 0.18 changed it
    SetVocab              when the 0.18 vocabulary names the columns otherwise
    SetDataSchema         the stored table's schema, before the first data and where it grows
    AddData               one per 0.18 block that added data or moved the watermark
    SetAttachments        ``ORIGIN_PATH``: the 0.18 head and which 0.18 block became which

Invariants:

- Each AddData's slice is the 0.18 slice's records (its system time column left out; event
  time and data columns as stored) put through ``odf_slice.build_slice`` at the 0.18 block's
  system time, offsets counting on from the previous slice; its watermark is the 0.18
  watermark in force after that block; its source state is the 0.18 fetch state where the
  reference has a kind for it (an ETag or a Last-Modified time of a URL), none otherwise.
- Blocks keep the 0.18 system times, so the upgrade of the same chain with the same key is the
  same chain, byte for byte. Every hash changes from the 0.18 ones: the ORIGIN attachment maps
  them.
- All or nothing: the folder is written under a temporary name beside the target, read back
  (``read.read_state``) and verified (``verify.verify_folder``), and only then renamed to
  ``<into>/<name>``; a target that exists is refused before anything is written.
- Refused in one line (``UpgradeError`` or ``NoCounterpart``): derivatives (not yet), snapshot
  roots (their observed rows need retractions and corrections, issue 34), a vocabulary that
  changes after the first block, a source with no 0.39 counterpart.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from ..data.odf_schema import data_schema
from ..data.odf_slice import Vocabulary, build_slice, write_slice
from ..errors import Conflict, CoordError
from ..metadata.multiformats import Multihash
from ..metadata.objects import DatasetSourceRoot, MergeStrategySnapshot
from ..metadata.odf39 import events as e
from ..metadata.odf39.from_odf18 import polling_source, set_vocab
from ..metadata.odf39.source import SourceState
from ..workspace.source_state import SourceState as FetchState
from ..workspace.source_state import UrlState
from . import layout
from .append import DatasetWriter, data_slice_of
from .read import DatasetState, read_state
from .verify import verify_folder

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..workspace.dataset import Dataset
    from ..workspace.state import DatasetState as State018
    from ..workspace.workspace import Workspace

ORIGIN_PATH = "coord/odf-0.18-origin.json"  # the attachment that says where the chain came from
SOURCE_NAME = "default"  # the reference's name for a polling source's state


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

    @property
    def records(self) -> int:
        return sum(s.slice.offset_interval.end - s.slice.offset_interval.start + 1
                   for s in self.state.slices)


def dataset_key_purpose(name: str) -> str:
    """What the workspace key derives a dataset's key for (``SigningKey.derive``)."""
    return f"did:odf dataset {name}"


def upgrade_root(ws: Workspace, name: str, into: Path) -> Upgraded:
    """Write the 0.18 root ``name`` of ``ws`` as the 0.39 dataset ``<into>/<name>``."""
    ds = ws.dataset(name)
    old = ds.state()
    _check_upgradable(old, name)
    target = into / name
    if target.exists():
        raise TargetExists(f"{target} exists; upgrade into another folder, or remove it first")
    into.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=layout.TMP_PREFIX + name + "-", dir=into))
    try:
        folder = staging / name
        origin = _write(ds, old, folder, staging / "writer.lock",
                        ws.signing_key.derive(dataset_key_purpose(name)))
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
    return Upgraded(name, target, state, origin)


def _check_upgradable(old: State018, name: str) -> None:
    if old.kind != "root":
        raise UpgradeError(f"{name} is a derivative; coord upgrade writes root datasets only "
                           "for now (derivatives come with their inputs' upgrade)")
    sources = [cb.block.source for cb in old.chain if cb.block.source is not None]
    if any(isinstance(s, DatasetSourceRoot) and isinstance(s.merge, MergeStrategySnapshot)
           for s in sources):
        raise UpgradeError(f"{name} is a snapshot root; its observed I/U/D rows become "
                           "retractions and corrections, which coord cannot write yet (issue 34)")
    vocabs = {cb.block.vocab for cb in old.chain if cb.block.vocab is not None}
    if len(vocabs) > 1:
        raise UpgradeError(f"{name}: its vocabulary changes along the chain; a 0.39 dataset "
                           "names its system columns once")


def _write(ds: Dataset, old: State018, folder: Path, lock: Path,
           key: Ed25519PrivateKey) -> tuple[tuple[bytes, Multihash], ...]:
    """Append the new chain to ``folder``; returns which 0.18 block became which 0.39 one."""
    blocks = list(reversed(old.chain))  # oldest first
    vocab = old.vocab
    names = Vocabulary(system_time=vocab.system_time, event_time=vocab.event_time)
    origin: list[tuple[bytes, Multihash]] = []
    with DatasetWriter(folder, lock) as w:
        first = blocks[0].block
        w.seed(key, e.DatasetKind.ROOT, first.system_time, alias=ds.id)
        schema = watermark = prev_offset = None
        for cb in blocks:
            b, when = cb.block, cb.block.system_time
            if isinstance(b.source, DatasetSourceRoot):
                w.append(polling_source(b.source, f"{ds.id}: source"), system_time=when)
                if cb is blocks[0] and (v := set_vocab(vocab)) is not None:
                    w.append(v, system_time=when)
            new_watermark = b.output_watermark or watermark
            has_data = b.output_slice is not None and b.output_slice.num_records > 0
            if not has_data and new_watermark == watermark:
                continue
            event = e.AddData(prev_offset=prev_offset, new_watermark=new_watermark,
                              new_source_state=_source_state(ds, old, cb.hash))
            path = None
            if has_data:
                table = pq.read_table(ds.data_file(cb.hash)).drop_columns([vocab.system_time])
                stored = build_slice(table, system_time=when, prev_offset=prev_offset,
                                     vocabulary=names)
                if schema != (new_schema := data_schema(stored.schema)):
                    w.append(e.SetDataSchema(schema=new_schema), system_time=when)
                    schema = new_schema
                path = folder.parent / f"slice-{cb.hash.hex()}.parquet"
                event = _with_data(event, data_slice_of(write_slice(stored, path, names)))
                prev_offset = event.new_data.offset_interval.end  # type: ignore[union-attr]
            origin.append((cb.hash, w.append(event, system_time=when, data=path)))
            watermark = new_watermark
        w.append(_origin_attachment(ds.id, old.head, origin), system_time=blocks[-1].block.system_time)
    return tuple(origin)


def _with_data(event: e.AddData, new_data: e.DataSlice) -> e.AddData:
    return e.AddData(prev_offset=event.prev_offset, new_data=new_data,
                     new_watermark=event.new_watermark, new_source_state=event.new_source_state)


def _source_state(ds: Dataset, old: State018, block: bytes) -> SourceState | None:
    """The 0.39 source state of the fetch state a 0.18 block stored, where the reference has a
    kind for it (``odf/etag``, ``odf/last-modified``); a block that ended within a file, or a
    glob's last file, has none (the reference would poll from the start of the source)."""
    if block not in old.fetch_states:
        return None
    path = ds.state_path(block)
    stored = FetchState.from_json(path.read_bytes(), where=f"{ds.id}: {path}")
    fetched = stored.fetched
    if stored.resume is not None or not isinstance(fetched, UrlState):
        return None
    if fetched.etag is not None:
        return SourceState(source_name=SOURCE_NAME, kind="odf/etag", value=fetched.etag)
    if fetched.last_modified is not None:
        when = parsedate_to_datetime(fetched.last_modified).astimezone(UTC)
        return _last_modified(int(when.timestamp()) * 10**9)
    if fetched.mtime_ns is not None:
        return _last_modified(fetched.mtime_ns)
    return None


def _last_modified(ns: int) -> SourceState:
    """RFC 3339 in UTC with as many fraction digits as needed (0, 3, 6 or 9), as the
    reference writes it (chrono's ``SecondsFormat::AutoSi``)."""
    seconds, fraction = divmod(ns, 10**9)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    for digits in (0, 3, 6, 9):
        if fraction % 10 ** (9 - digits) == 0:
            text += f".{fraction // 10 ** (9 - digits):0{digits}d}" if digits else ""
            break
    return SourceState(source_name=SOURCE_NAME, kind="odf/last-modified", value=text + "Z")


def _origin_attachment(name: str, head: bytes,
                       origin: list[tuple[bytes, Multihash]]) -> e.SetAttachments:
    content = {
        "upgradedFrom": {"odf": "0.18", "dataset": name, "head": head.hex()},
        "blocks": [{"odf018": old.hex(), "odf039": str(new)} for old, new in origin],
    }
    text = json.dumps(content, indent=2, sort_keys=True) + "\n"
    return e.SetAttachments(attachments=e.AttachmentsEmbedded(
        items=[e.AttachmentEmbedded(path=ORIGIN_PATH, content=text)]))

