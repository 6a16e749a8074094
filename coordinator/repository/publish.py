"""``coord publish DS --to-feed URL``: a dataset's blocks as File Feed updates (docs/feeds.md).

Each block with data not yet published to the URL becomes one update (``--since-last``: all of
them one update). An update is named by its newest block's system time, ``YYYYMMDD.HHMMSS``;
names only grow, so when the feed holds that second or a later one the update takes the second
after the feed's newest (``_name_updates``). It holds
one part file per block (the slice's records without the system time column, so its logical
hash is the block's), ``_coord.json`` (dataset, blocks, logical hashes) and ``_SUCCESS`` with
the part count, written after every other file of the update and after every older update's
``_SUCCESS`` (``repository.feed.complete_update``).

Invariants:
- What was published where is recorded in ``.coord/cache/<id>/published.json`` when a run
  ends (also when it fails); a block recorded for a URL is never published there again.
- A run interrupted before an update's ``_SUCCESS`` left an update readers ignore; the next
  run computes the same name for the same blocks and rewrites it whole. A complete update
  that is not recorded (interrupted before the record) is found by the next run's listing,
  its ``_coord.json`` naming the same blocks: it is recorded, not rewritten.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from ..errors import Invalid
from ..metadata.objects import DatasetVocabulary, MetadataBlock
from ..metadata.timestamps import UTC, format_timestamp
from ..trust.slice_check import checked_slices
from ..workspace import DatasetNotFound, Workspace, layout
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


def publish(ws: Workspace, dataset_id: str, url: str, *, fmt: str = "parquet",
            since_last: bool = False, progress: Progress | None = None) -> PublishResult:
    from .feed import MANIFEST, complete_update
    from .fileio import open_url

    if fmt not in FORMATS:
        raise PublishError(f"--format {fmt}: use one of {', '.join(FORMATS)}")
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    io = open_url(url)
    record_path = ws.meta / layout.cache_dir(dataset_id, layout.PUBLISHED)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    updates: dict[str, list[str]] = record.setdefault(url, {})  # update name → block hashes
    published = {h for hashes in updates.values() for h in hashes}
    chain = list(ds.blocks())  # newest first
    system_time = next((b.vocab for _, b in chain if b.vocab), DatasetVocabulary()).system_time
    new = [(h, b) for h, b in reversed(chain)
           if b.output_slice is not None and h.hex() not in published]
    batches = [new] if since_last and new else [[x] for x in new]
    plans = _name_updates(io, batches, updates)
    result = PublishResult(dataset_id, url)
    progress = progress or NoProgress()
    record_path.parent.mkdir(parents=True, exist_ok=True)
    to_write = [(name, batch) for name, batch, written in plans if not written]
    checked_slices(ds, [x for _, batch in to_write for x in batch])  # never publish a changed slice
    progress.start(sum(ds.data_file(h).stat().st_size for _, batch in to_write for h, _ in batch),
                   f"publish {dataset_id}")
    try:
        with ThreadPoolExecutor(max_workers=_UPLOADS) as pool:
            # parts are converted and uploaded in parallel (the pool bounds the memory held)
            jobs = {name: [pool.submit(io.write_bytes, f"{name}/{MANIFEST}",
                                       _manifest(dataset_id, batch, fmt))]
                    + [pool.submit(_upload_part, io, ds.data_file(h), system_time,
                                   f"{name}/part-{i:05d}.{fmt}", progress)
                       for i, (h, _) in enumerate(batch)]
                    for name, batch in to_write}
            # updates complete in name order: a reader never sees a newer one before an older
            for name, batch, _ in plans:
                if name in jobs:
                    for job in jobs[name]:
                        job.result()
                    complete_update(io, name, len(batch))
                updates[name] = [h.hex() for h, _ in batch]
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
        hashes = tuple(h.hex() for h, _ in batch)
        if hashes in found:
            plans.append((found[hashes], batch, True))
            continue
        name = update_name(batch[-1][1].system_time)
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


def _upload_part(io, source: Path, system_time: str, path: str, progress: Progress) -> None:
    """The block's records without the system time column, written to ``path`` in the feed
    (Parquet or CSV by the extension)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = [c for c in pq.read_schema(source).names if c != system_time]
    table = pq.read_table(source, columns=columns)
    sink = pa.BufferOutputStream()
    if path.endswith(".csv"):
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
    else:
        pq.write_table(table, sink)
    io.write_bytes(path, sink.getvalue())
    progress.advance(source.stat().st_size)


def _manifest(dataset_id: str, batch: list[tuple[bytes, MetadataBlock]], fmt: str) -> bytes:
    """``_coord.json``: the dataset, the blocks, and per part its block's logical hash (which
    the part's records hash to: the system time column is not hashed) and record count."""
    slices = []
    for i, (h, b) in enumerate(batch):
        s = b.output_slice
        assert s is not None  # only blocks with data are published
        slices.append({"file": f"part-{i:05d}.{fmt}", "block": h.hex(),
                       "systemTime": format_timestamp(b.system_time),
                       "logicalHash": s.hash.hex(), "numRecords": s.num_records})
    doc = {"dataset": dataset_id, "blocks": [h.hex() for h, _ in batch], "slices": slices}
    return json.dumps(doc, indent=1).encode()
