"""A current-ODF (0.39) root fed by a File Feed (docs/feeds.md): coord's extension, kept beside
the chain, which the reference ignores.

ODF 0.39 has no fetch step for a File Feed, so the chain never claims one:

- The chain holds no source event for it: no SetPollingSource (the reference would poll a Url
  or FilesGlob stand-in that is not what is read) and no AddPushSource (nothing pushes).
  ``coord add`` of a root whose fetch is ``fileFeed`` keeps its whole source (fetch, prepare,
  read, preprocess, merge, in the manifest's ODF 0.18 form) in
  ``.coord/cache/<name>/file-feed.json`` (``{"source": {...}}``); defining a polling source
  (``coord add --replace``) removes the file. A root whose chain has a polling source cannot
  take a File Feed (the reference refuses a DisablePollingSource); a polling source in force
  wins over a kept file.
- Each AddData of an update records which update it holds in ``newSourceState``: source
  ``fileFeed``, kind ``coord/file-feed``, value the update's prefix in the feed
  (``20240521.160000``, ``2024-05-20/20240521.160000`` under partitions). The reference's
  chain rules take a state of any kind, and with no source of that name it reads nothing from
  it; a reader of the chain alone sees the update behind each block.
- The workspace's fetch state of each block (``workspace.source_state.FeedState``: update,
  files, consumed, superseded) is kept in ``.coord/cache/<name>/state/`` as for every root and
  decides what a pull takes. When the workspace keeps none (its cache lost, then the manifest
  added again) the chain's records stand for it (``chain_feed_state``): every update they name
  is consumed, its file count unknown, so a pull takes only newer updates.
- A copy pulled from a repository (by coord or the reference) is a root with data and no
  source: pushing does not carry the file, and the chain stays valid for the reference.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

from ..metadata.objects import DatasetSourceRoot, FetchStepFileFeed
from ..metadata.odf39 import events as e
from ..metadata.odf39.source import SourceState
from ..metadata.yaml_codec import DecodeError, from_dict, to_dict
from ..workspace import layout as ws_layout
from ..workspace.fsutil import atomic_write
from ..workspace.source_state import UNKNOWN_COUNT, FeedState, SourceStateError, fingerprint

if TYPE_CHECKING:
    from ..workspace.workspace import Workspace
    from .read import DatasetState

FILE = "file-feed.json"
SOURCE_NAME = "fileFeed"  # the source an update's newSourceState names
KIND = "coord/file-feed"  # its kind: the value is the update's prefix


class KeptFeedError(SourceStateError):
    """The kept source does not decode (a file not as coord wrote it)."""


def is_feed(source: object) -> TypeGuard[DatasetSourceRoot]:
    """Whether ``source`` (a 0.18 dataset source) is a root fed by a File Feed."""
    return isinstance(source, DatasetSourceRoot) and isinstance(source.fetch, FetchStepFileFeed)


def kept_feed_source(ws: Workspace, name: str) -> DatasetSourceRoot | None:
    """The File Feed source kept for the 0.39 root ``name`` (None: none is kept)."""
    path = _file(ws, name)
    try:
        raw = json.loads(path.read_bytes())
        source = from_dict(DatasetSourceRoot, raw["source"], "source")
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, DecodeError) as err:
        raise KeptFeedError(f"{name}: {path} is not the File Feed source coord keeps ({err}); "
                            "add the dataset's manifest again (coord add --replace)") from None
    if not is_feed(source):
        raise KeptFeedError(f"{name}: {path} holds no fileFeed fetch; add the dataset's manifest "
                            "again (coord add --replace)")
    return source


def keep_feed_source(ws: Workspace, name: str, source: DatasetSourceRoot | None) -> bool:
    """Keep ``source`` for ``name`` (None: remove the kept one); whether that changed anything."""
    path = _file(ws, name)
    data = None if source is None else json.dumps({"source": to_dict(source)}, sort_keys=True).encode()
    try:
        before = path.read_bytes()
    except FileNotFoundError:
        before = None
    if before == data:
        return False
    if data is None:
        path.unlink()
    else:
        atomic_write(path, data)
    return True


def feed_source_state(state: FeedState) -> SourceState:
    """An AddData's ``newSourceState`` for the update ``state`` was read from."""
    return SourceState(source_name=SOURCE_NAME, kind=KIND, value=state.update)


def chain_feed_state(s: DatasetState, fetch: FetchStepFileFeed) -> FeedState | None:
    """The feed's progress as the chain records it (None: it records no update): every update
    an AddData names is consumed, its file count unknown (``UNKNOWN_COUNT``)."""
    updates = [event.new_source_state.value for event in (b.block.event for b in s.blocks)
               if isinstance(event, e.AddData) and event.new_source_state is not None
               and event.new_source_state.kind == KIND]
    if not updates:
        return None
    return FeedState(fingerprint(fetch), updates[-1], (),
                     tuple((u, UNKNOWN_COUNT) for u in dict.fromkeys(updates)), ())


def _file(ws: Workspace, name: str) -> Path:
    return ws.meta / ws_layout.cache_dir(name, FILE)
