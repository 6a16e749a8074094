"""``coord publish DS --to-feed URL``: a dataset's blocks as File Feed updates (docs/feeds.md).

Each block with data not yet published to the URL becomes one update (``--since-last``: all of
them one update). An update is named by its newest block's system time, ``YYYYMMDD.HHMMSS``;
names only grow, so when the feed holds that second or a later one the update takes the second
after the feed's newest (``_name_updates``). It holds
one part file per block (the slice's records without the system time column, so its logical
hash is the block's; a current-ODF (0.39) slice's without its offset too, and without its op
column when every record is an append), ``_coord.json`` (dataset, blocks, logical hashes; a
0.39 block by its multihash, with its offsets, and the op column's name for a part that keeps
it) and ``_SUCCESS`` with the part count, written after every other file of the update and
after every older update's ``_SUCCESS`` (``repository.feed.complete_update``).

Invariants:
- A part holding a retraction or a correction says so: it keeps the slice's op column (ODF's
  operation types: 0 append, 1 retract, 2 correct-from, 3 correct-to), and its ``_coord.json``
  entry names that column (``operationTypeColumn``); a part of appends has neither, as a 0.18
  part. A reader of the convention that does not know the column reads it as data, never a
  retraction as a plain record without it.
- What was published where is recorded in ``.coord/cache/<id>/published.json`` when a run
  ends (also when it fails); a block recorded for a URL is never published there again.
- A run interrupted before an update's ``_SUCCESS`` left an update readers ignore; the next
  run computes the same name for the same blocks and rewrites it whole. A complete update
  that is not recorded (interrupted before the record) is found by the next run's listing,
  its ``_coord.json`` naming the same blocks: it is recorded, not rewritten.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from ..errors import Invalid
from ..metadata.objects import DatasetVocabulary
from ..metadata.timestamps import UTC, format_timestamp
from ..trust.slice_check import checked_slices
from ..workspace import DatasetNotFound, Workspace, layout
from ..workspace.config import OdfVersion
from ..workspace.fsutil import atomic_write
from ..workspace.progress import NoProgress, Progress

FORMATS = ("parquet", "csv")
_MANIFEST_LIMIT = 1 << 20
_UPLOADS = 4


class PublishError(Invalid):
    pass


@dataclass
class PublishResult:
    dataset_id: str
    url: str
    updates: list[str] = field(default_factory=list)  # the update prefixes written, in order
    blocks: int = 0  # blocks those updates hold

    @property
    def message(self) -> str:
        if not self.updates:
            return f"nothing new to publish to {self.url}"
        return (f"{self.blocks} block{'s' * (self.blocks != 1)} published to {self.url} as "
                f"{len(self.updates)} update{'s' * (len(self.updates) != 1)} "
                f"({', '.join(self.updates[:3])}{', ...' if len(self.updates) > 3 else ''})")


@dataclass(frozen=True)
class Part:
    """A block with data as a feed publishes it: one part file."""

    block: str  # how _coord.json and the record name it: 0.18 hash hex, 0.39 multihash text
    system_time: datetime
    file: Path  # the slice as stored
    facts: dict  # what _coord.json says of it besides file, block and system time


@dataclass(frozen=True)
class Parts:
    """What a dataset publishes: its blocks with data (oldest first), the stored columns a part
    leaves out, and how their files are checked before anything is read."""

    parts: list[Part]
    left_out: tuple[str, ...]  # the system time, and a 0.39 slice's offset and op
    op: str | None  # a 0.39 slice's op column: kept in a part that holds other than appends
    check: Callable[[list[Part]], object]  # raises ``ChangedSlice`` for a changed file


def _parts(ws: Workspace, dataset_id: str) -> Parts:
    if ws.odf_of(dataset_id) is OdfVersion.V039:
        return _current_parts(ws, dataset_id)
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    chain = list(ds.blocks())  # newest first
    system_time = next((b.vocab for _, b in chain if b.vocab), DatasetVocabulary()).system_time
    blocks = {h.hex(): (h, b) for h, b in chain}
    parts = [Part(h.hex(), b.system_time, ds.data_file(h),
                  {"logicalHash": b.output_slice.hash.hex(), "numRecords": b.output_slice.num_records})
             for h, b in reversed(chain) if b.output_slice is not None]
    return Parts(parts, (system_time,), None,
                 lambda chosen: checked_slices(ds, [blocks[p.block] for p in chosen]))


def _current_parts(ws: Workspace, name: str) -> Parts:
    """A current-ODF (0.39) dataset's parts: its slices, each named by its block's multihash,
    with its offsets; the logical hash is the stored slice's (offset, op, system time included)."""
    from ..store.checked import checked_current_files
    from ..store.dataset import CurrentDataset
    from ..store.verify import vocabulary_of

    ds = CurrentDataset(ws, name)
    state = ds.state()
    v = vocabulary_of(state.vocab)
    records = {str(r.block_hash): r for r in state.slices}
    parts = [Part(block, r.system_time, ds.data_file(r.slice), {
        "logicalHash": str(r.slice.logical_hash),
        "offsets": [r.slice.offset_interval.start, r.slice.offset_interval.end],
        "numRecords": r.slice.offset_interval.end - r.slice.offset_interval.start + 1})
        for block, r in records.items()]
    return Parts(parts, (v.system_time, v.offset, v.operation_type), v.operation_type,
                 lambda chosen: checked_current_files(ds, [records[p.block] for p in chosen]))


def publish(ws: Workspace, dataset_id: str, url: str, *, fmt: str = "parquet",
            since_last: bool = False, progress: Progress | None = None) -> PublishResult:
    from .feed import MANIFEST, complete_update
    from .fileio import open_url

    if fmt not in FORMATS:
        raise PublishError(f"--format {fmt}: use one of {', '.join(FORMATS)}")
    dataset = _parts(ws, dataset_id)
    io = open_url(url)
    record_path = ws.meta / layout.cache_dir(dataset_id, layout.PUBLISHED)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    updates: dict[str, list[str]] = record.setdefault(url, {})  # update name → blocks
    published = {h for hashes in updates.values() for h in hashes}
    new = [p for p in dataset.parts if p.block not in published]
    batches = [new] if since_last and new else [[x] for x in new]
    plans = _name_updates(io, batches, updates)
    result = PublishResult(dataset_id, url)
    progress = progress or NoProgress()
    record_path.parent.mkdir(parents=True, exist_ok=True)
    to_write = [(name, batch) for name, batch, written in plans if not written]
    dataset.check([p for _, batch in to_write for p in batch])  # never publish a changed slice
    progress.start(sum(p.file.stat().st_size for _, batch in to_write for p in batch),
                   f"publish {dataset_id}")
    try:
        with ThreadPoolExecutor(max_workers=_UPLOADS) as pool:
            # parts are converted and uploaded in parallel (the pool bounds the memory held)
            jobs = {name: [pool.submit(_upload_part, io, p, dataset, f"{name}/part-{i:05d}.{fmt}", progress)
                           for i, p in enumerate(batch)]
                    for name, batch in to_write}
            # updates complete in name order: a reader never sees a newer one before an older;
            # _coord.json follows its parts (it says which kept the op column), _SUCCESS it
            for name, batch, _ in plans:
                if name in jobs:
                    kept_op = [job.result() for job in jobs[name]]
                    io.write_bytes(f"{name}/{MANIFEST}", _manifest(dataset_id, batch, fmt, kept_op))
                    complete_update(io, name, len(batch))
                updates[name] = [p.block for p in batch]
                result.updates.append(name)
                result.blocks += len(batch)
    finally:
        progress.finish()
        # what completed is recorded even when a later update failed
        atomic_write(record_path, json.dumps(record, indent=1, sort_keys=True).encode())
    return result


def _name_updates(io, batches: list, recorded: dict[str, list[str]]) -> list[tuple[str, list, bool]]:
    """Each batch's update name, and whether a complete update of it is already there.

    A complete update this workspace did not record (a run stopped before recording) is
    recognised by the blocks its ``_coord.json`` names and kept. Otherwise the name is the
    newest block's second, or the second after the newest update of the feed (recorded or
    complete) if that is later: names only grow, so no reader sees a new update as older
    than one it took. An interrupted run's incomplete update gets the same name again.
    """
    from .feed import list_feed, update_name

    complete = {u.name for u in list_feed(io).updates if u.has_marker} if batches else set()
    found: dict[tuple, str] = {}
    for name in sorted(complete - set(recorded)):
        blocks = _existing_manifest(io, name).get("blocks")
        if isinstance(blocks, list) and all(isinstance(b, str) for b in blocks):
            found[tuple(blocks)] = name
    last = max([*recorded, *complete], default="")
    plans = []
    for batch in batches:
        hashes = tuple(p.block for p in batch)
        if hashes in found:
            plans.append((found[hashes], batch, True))
            continue
        name = update_name(batch[-1].system_time)
        if name <= last:
            name = _next_second(last)
        plans.append((name, batch, False))
        last = name
    return plans


def _next_second(name: str) -> str:
    from .feed import UPDATE_FORMAT, update_name

    t = datetime.strptime(name, UPDATE_FORMAT).replace(tzinfo=UTC)
    return update_name(t + timedelta(seconds=1))


def _existing_manifest(io, name: str) -> dict:
    """The ``_coord.json`` of the update of that name ({} if it has none or another kind)."""
    from .feed import MANIFEST

    data = io.read_bytes(f"{name}/{MANIFEST}", _MANIFEST_LIMIT)
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        return {}  # someone else's update
    return doc if isinstance(doc, dict) else {}


def _upload_part(io, part: Part, dataset: Parts, path: str, progress: Progress) -> str | None:
    """The block's records without the dataset's ``left_out`` columns, written to ``path`` in
    the feed (Parquet or CSV by the extension); the op column is kept, after the data, where a
    0.39 slice holds anything but appends (docs/feeds.md). Returns its name when kept."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    kept = [c for c in pq.read_schema(part.file).names if c not in dataset.left_out]
    table = pq.read_table(part.file, columns=kept + ([dataset.op] if dataset.op else []))
    changes = dataset.op is not None and pc.any(pc.not_equal(table[dataset.op], 0)).as_py()
    if not changes:
        table = table.select(kept)
    sink = pa.BufferOutputStream()
    if path.endswith(".csv"):
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
    else:
        pq.write_table(table, sink)
    io.write_bytes(path, sink.getvalue())
    progress.advance(part.file.stat().st_size)
    return dataset.op if changes else None


def _manifest(dataset_id: str, batch: list[Part], fmt: str, kept_op: list[str | None]) -> bytes:
    """``_coord.json``: the dataset, the blocks, and per part its block, system time and what
    the block says of its records (logical hash, record count; a 0.39 block's offsets, and the
    op column a part keeps, ``kept_op``): a 0.18 part's records hash to that logical hash, the
    system time column not being hashed."""
    slices = [{"file": f"part-{i:05d}.{fmt}", "block": p.block,
               "systemTime": format_timestamp(p.system_time), **p.facts,
               **({"operationTypeColumn": op} if op is not None else {})}
              for i, (p, op) in enumerate(zip(batch, kept_op, strict=True))]
    doc = {"dataset": dataset_id, "blocks": [p.block for p in batch], "slices": slices}
    return json.dumps(doc, indent=1).encode()
