"""Fetch step ``fileFeed``: which updates of a File Feed a pull takes, and their data files.

The feed convention itself (listing, what a complete update is) is ``repository/feed.py``;
this module decides what to ingest given what the dataset already holds:

- Updates are taken by name (= creation time), oldest first, each as its own block; only
  complete updates newer than the newest one ingested (per partition) are taken.
- An update without ``_SUCCESS`` is passed over, as the convention's readers do. An update
  whose ``_SUCCESS`` names more files than are listed (an eventually consistent store) stops
  the pull before it: its producer finished, so it will be complete, and taking a newer one
  first would make it unconsumable.
- An invalidated update is reported and skipped; so is a complete update older than one
  already ingested (it is never merged), and an ingested update whose ``_SUCCESS`` was later
  removed or whose files changed. An ingested update deleted whole (retention) is not news.
- Partitioned feeds take each partition's latest valid update; the older ones it supersedes
  are settled with it.

State stored with each block (``FeedState``, ``workspace/source_state.py``): ``update`` and
``files`` (the prefix and data files the block was read from: its provenance), ``consumed``
(every ingested update → its number of data files) and ``superseded`` (updates passed over
for a newer one of their partition).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CoordError
from ..metadata.objects import FetchStepFileFeed, SuccessMarker
from ..workspace.progress import Progress
from ..workspace.source_state import UNKNOWN_COUNT, FeedState, fingerprint
from .errors import IngestError
from .fetched import FetchedFile

_MAX_PARTITIONS = 8
_DOWNLOADS = 8  # parallel part downloads


@dataclass
class FeedPlan:
    take: list  # the updates to ingest (repository.feed.Update), oldest first
    states: list[FeedState]  # the source state to store with each taken update's block
    notes: list[str] = field(default_factory=list)  # what the user should know, one line each


def plan(step: FetchStepFileFeed, state: FeedState | None):
    """Open and list the feed; returns (the feed's FileIO, FeedPlan). ``state``: the feed's
    progress stored with the newest block (None: nothing ingested by this step yet)."""
    from ..repository.feed import UpdateStatus, judge, list_feed, read_markers
    from ..repository.fileio import open_url

    partitions = step.partitions or 0
    if not 0 <= partitions <= _MAX_PARTITIONS:
        raise IngestError(f"fetch fileFeed {step.url}: partitions must be 0..{_MAX_PARTITIONS}")
    try:
        io = open_url(step.url)
        listing = list_feed(io, partitions)
    except CoordError as e:
        raise IngestError(f"fetch fileFeed: {e}") from None
    consumed: dict[str, int] = dict(state.consumed) if state is not None else {}
    superseded: set[str] = set(state.superseded) if state is not None else set()
    notes = [f"{s}/: not an update name (YYYYMMDD.HHMMSS), ignored" for s in listing.strays]
    present = {u.prefix: u for u in listing.updates}
    for prefix, count in consumed.items():
        u = present.get(prefix)
        if u is not None and (not u.has_marker or count not in (len(u.files), UNKNOWN_COUNT)):
            notes.append(f"{prefix}/: invalidated after it was ingested ({len(u.files)} files, "
                         f"{'_SUCCESS' if u.has_marker else 'no _SUCCESS'}; {count} were "
                         "ingested); the dataset keeps what it read")

    newest: dict[str, str] = {}
    for prefix in consumed:
        partition, _, name = prefix.rpartition("/")
        newest[partition] = max(newest.get(partition, name), name)
    chosen: dict[str, list] = {}
    waiting: set[str] = set()
    candidates = [u for u in listing.updates
                  if u.prefix not in consumed and u.prefix not in superseded]
    markers = read_markers(io, candidates) if step.success_marker is not SuccessMarker.HADOOP \
        else {}
    for u in candidates:
        if u.partition in waiting:
            continue
        verdict = judge(u, step.success_marker, markers.get(u.prefix, b""))
        if u.name <= newest.get(u.partition, ""):
            if verdict.status is UpdateStatus.COMPLETE:
                notes.append(f"{u.prefix}/: older than {newest[u.partition]}, already ingested; "
                             "not merged")
        elif verdict.status is UpdateStatus.INVALID:
            notes.append(f"{u.prefix}/: invalidated ({verdict.reason}); not ingested")
        elif verdict.status is UpdateStatus.SHORT:
            notes.append(f"{u.prefix}/: incomplete ({verdict.reason}); waiting for it")
            waiting.add(u.partition)
        elif verdict.status is UpdateStatus.COMPLETE:
            chosen.setdefault(u.partition, []).append(u)

    take, passed_over = [], {}
    for updates in chosen.values():
        if partitions:  # the latest valid update stands for the partition
            take.append(updates[-1])
            passed_over[updates[-1].prefix] = [u.prefix for u in updates[:-1]]
        else:
            take += updates
    take.sort(key=lambda u: (u.name, u.partition))
    states, fp = [], fingerprint(step)
    for u in take:
        consumed[u.prefix] = len(u.files)
        superseded.update(passed_over.get(u.prefix, ()))
        states.append(FeedState(fp, u.prefix, tuple(u.files), tuple(consumed.items()),
                                tuple(superseded)))
    return io, FeedPlan(take, states, notes)


def download(io, feed_plan: FeedPlan, scratch: Path, progress: Progress) -> list:
    """The taken updates' data files as local files (FetchedFile), in ingest order."""
    from ..repository.fileio import TooLarge

    jobs = []
    for k, (u, state) in enumerate(zip(feed_plan.take, feed_plan.states, strict=True)):
        for j, (name, size) in enumerate(u.files.items()):
            # a flat local name: the feed's names are a stranger's, never a path to follow
            local = scratch / "feed" / f"{k:05d}-{j:05d}-{Path(name).name}"
            jobs.append((u, state, name, size, local))
    progress.start(sum(size for _, _, _, size, _ in jobs), f"fetch {len(feed_plan.take)} updates")

    def get(job) -> None:
        u, _, name, size, local = job
        try:
            io.get_file(u.path(name), local, lambda n: None, limit=size)
        except TooLarge:
            raise IngestError(f"fetch fileFeed: {u.path(name)} grew since it was listed; its "
                              "update is being rewritten, pull again later") from None
        except FileNotFoundError:
            raise IngestError(f"fetch fileFeed: {u.path(name)} disappeared since it was listed; "
                              "pull again later") from None

    try:
        with ThreadPoolExecutor(max_workers=_DOWNLOADS) as pool:
            for job, _ in zip(jobs, pool.map(get, jobs), strict=True):
                progress.advance(job[3])
    finally:
        progress.finish()
    return [FetchedFile(path=local, name=u.path(name), event_time=u.time, state=state,
                        batch=u.prefix)
            for u, state, name, _, local in jobs]
