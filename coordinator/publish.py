"""``coord publish DS --to-feed URL``: a dataset's blocks as File Feed updates (docs/feeds.md).

Each block with data not yet published to the URL becomes one update (``--since-last``: all of
them one update). An update is named by its newest block's system time, ``YYYYMMDD.HHMMSS``;
names only grow, so when that second is already taken the next free second is used. It holds
one part file per block (the slice's records without the system time column, so its logical
hash is the block's), ``_coord.json`` (dataset, blocks, data hashes) and ``_SUCCESS`` with the
part count, written last (``repository.feed.write_update``).

Invariants:
- What was published where is recorded in ``.coord/cache/<id>/published.json`` after each
  update's ``_SUCCESS``; a block recorded for a URL is never published there again.
- A run interrupted before ``_SUCCESS`` left an update readers ignore; the next run computes
  the same name for the same blocks and rewrites it whole. A run interrupted after
  ``_SUCCESS`` but before the record finds the complete update naming the same blocks and
  only records it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from .errors import CoordError
from .metadata.objects import DatasetVocabulary, MetadataBlock
from .metadata.timefmt import UTC, format_timestamp
from .progress import NoProgress, Progress
from .workspace import DatasetNotFound, Workspace, layout
from .workspace.fsutil import atomic_write
from .workspace.runs import run_folder

FORMATS = ("parquet", "csv")
_MANIFEST_LIMIT = 1 << 20


class PublishError(CoordError):
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
    from .repository.feed import MANIFEST, MARKER, update_name, write_update
    from .repository.fileio import open_url

    if fmt not in FORMATS:
        raise PublishError(f"--format {fmt}: use one of {', '.join(FORMATS)}")
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    io = open_url(url)
    record_path = ws.meta / layout.published_record(dataset_id)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    updates: dict[str, list[str]] = record.setdefault(url, {})  # update name → block hashes
    published = {h for hashes in updates.values() for h in hashes}
    chain = list(ds.blocks())  # newest first
    system_time = next((b.vocab for _, b in chain if b.vocab), DatasetVocabulary()).system_time
    new = [(h, b) for h, b in reversed(chain)
           if b.output_slice is not None and h.hex() not in published]
    batches = [new] if since_last and new else [[x] for x in new]
    result = PublishResult(dataset_id, url)
    progress = progress or NoProgress()
    last = max(updates, default="")
    with run_folder(ws.run_dir, f"publish-{dataset_id}") as scratch:
        for batch in batches:
            hashes = [h.hex() for h, _ in batch]
            name = update_name(batch[-1][1].system_time)
            while True:
                if name <= last:
                    name = _next_second(last)
                manifest = _existing_manifest(io, name, MANIFEST, MARKER)
                if manifest is None or manifest.get("blocks") == hashes:
                    break
                last = name  # a complete update of other blocks: the name is taken
            if manifest is None:
                parts = [_part(ds.data_file(h), system_time, i, fmt, scratch)
                         for i, (h, _) in enumerate(batch)]
                body = _manifest(dataset_id, batch, parts)
                size = sum(p.stat().st_size for _, p in parts)
                progress.start(size, f"publish {dataset_id} → {name}")
                try:
                    write_update(io, name, parts, body, progress.advance)
                finally:
                    progress.finish()
                for _, p in parts:
                    p.unlink()
            updates[name] = hashes
            record_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(record_path, json.dumps(record, indent=1, sort_keys=True).encode())
            last = name
            result.updates.append(name)
            result.blocks += len(batch)
    return result


def _next_second(name: str) -> str:
    from .repository.feed import UPDATE_FORMAT, update_name

    t = datetime.strptime(name, UPDATE_FORMAT).replace(tzinfo=UTC)
    return update_name(t + timedelta(seconds=1))


def _existing_manifest(io, name: str, manifest: str, marker: str) -> dict | None:
    """The ``_coord.json`` of a complete update of that name; None if there is none."""
    if io.read_bytes(f"{name}/{marker}", 64) is None:
        return None
    data = io.read_bytes(f"{name}/{manifest}", _MANIFEST_LIMIT)
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {}  # someone else's update: the name is taken


def _part(source: Path, system_time: str, i: int, fmt: str, scratch: Path) -> tuple[str, Path]:
    """The block's records without the system time column, as a part file."""
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    if system_time in table.column_names:
        table = table.drop_columns([system_time])
    name = f"part-{i:05d}.{fmt}"
    target = scratch / name
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, target)
    else:
        pq.write_table(table, target)
    return name, target


def _manifest(dataset_id: str, batch: list[tuple[bytes, MetadataBlock]],
              parts: list[tuple[str, Path]]) -> bytes:
    from .data.hashing import physical_hash

    slices = []
    for (h, b), (name, path) in zip(batch, parts, strict=True):
        s = b.output_slice
        assert s is not None  # only blocks with data are published
        slices.append({"block": h.hex(), "systemTime": format_timestamp(b.system_time),
                       "file": name, "logicalHash": s.hash.hex(), "numRecords": s.num_records,
                       "fileHash": physical_hash(path).hex()})
    doc = {"dataset": dataset_id, "blocks": [h.hex() for h, _ in batch], "slices": slices}
    return json.dumps(doc, indent=1).encode()
