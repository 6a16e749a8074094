"""``pull_root``: bring a root dataset up to date (what ``coord pull`` calls for root datasets).

One pull, under the dataset's writer lock:

    fetch → for each group of new files: prepare → read → preprocess → event time
          → merge → conform → slice (Parquet, hashes) → commit block + source state

For append and ledger merges all new files of a pull form one slice. For a snapshot merge each
file is its own block, because each snapshot is diffed against the state just before it. Files
the fetch step batches (a feed's update) form one block whatever the merge.
A block is committed when there are new records or the watermark moves; otherwise nothing is
written. Any error leaves the dataset as it was (the commit is the last step). Arrow and the
data steps are imported once there is something to read: nothing new costs no Arrow.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.objects import (
    MergeStrategyLedger,
    MergeStrategySnapshot,
    MetadataBlock,
    TransformSql,
)
from ..metadata.timefmt import format_timestamp, parse_timestamp
from ..progress import NoProgress, Progress
from ..workspace import DatasetState, DatasetWriter, Workspace
from ..workspace.runs import run_folder
from .errors import IngestError
from .fetch import FetchedFile, fetch
from .history import DatasetHistory

if TYPE_CHECKING:
    import pyarrow as pa

Preprocess = Callable[["pa.Table", TransformSql], "pa.Table"]


@dataclass
class IngestResult:
    dataset_id: str
    block_hash: bytes | None  # the newest block this pull committed, None if none
    num_records: int
    watermark: datetime | None
    message: str  # "3 new records", "up to date", ...
    blocks: list[bytes] = field(default_factory=list)  # every block committed, in order
    notes: list[str] = field(default_factory=list)  # the source's news (a feed's invalid updates)


def pull_root(ws: Workspace, dataset_id: str, *, progress: Progress | None = None,
              set_watermark: datetime | str | None = None,
              preprocess: Preprocess | None = None, state: DatasetState | None = None) -> IngestResult:
    """``state``: the dataset as this command already read it (taken if still current)."""
    ds = ws.dataset(dataset_id)
    with ds.writer(state) as writer:
        history = DatasetHistory.load(ds, writer.state)
        if set_watermark is not None:
            return _set_watermark(writer, history, parse_timestamp(set_watermark))
        if history.source.preprocess is not None and preprocess is None:
            raise IngestError(f"{dataset_id}: the source has a preprocess step, which needs the "
                              "SQL engine; none was given to this pull")
        with run_folder(ws.run_dir, f"ingest-{dataset_id}") as scratch:
            pull = _Pull(ws, writer, history, scratch, progress or NoProgress(), preprocess)
            return pull.run()


def _set_watermark(writer: DatasetWriter, history: DatasetHistory, t: datetime) -> IngestResult:
    current = history.watermark
    if current is not None and t < current:
        raise IngestError(f"{history.ds.id}: watermark {format_timestamp(t)} is before the "
                          f"current watermark {format_timestamp(current)}")
    if t == current:
        return IngestResult(history.ds.id, None, 0, current, "watermark unchanged")
    h = writer.commit(MetadataBlock(system_time=history.next_system_time(), output_watermark=t))
    return IngestResult(history.ds.id, h, 0, t, f"watermark set to {format_timestamp(t)}", [h])


class _Pull:
    def __init__(self, ws: Workspace, writer: DatasetWriter, history: DatasetHistory,
                 scratch: Path, progress: Progress, preprocess: Preprocess | None):
        self.ws, self.writer, self.history = ws, writer, history
        self.scratch, self.progress, self.preprocess = scratch, progress, preprocess
        self.source, self.vocab = history.source, history.vocab
        # snapshot merges: the state before the next file, loaded once, advanced per block
        self.snapshot_state: pa.Table | None = None
        self.snapshot_state_loaded = False

    def run(self) -> IngestResult:
        notes: list[str] = []
        files = fetch(self.source.fetch, root=self.ws.root, scratch=self.scratch,
                      state=self.history.state, progress=self.progress, notes=notes)
        is_snapshot = isinstance(self.source.merge, MergeStrategySnapshot)
        if files and files[0].batch is not None:
            groups = [list(g) for _, g in itertools.groupby(files, key=lambda f: f.batch)]
        else:
            groups = [[f] for f in files] if is_snapshot else [files] if files else []
        blocks, records = [], 0
        for group in groups:
            h, n = self._ingest(group)
            if h is not None:
                blocks.append(h)
                records += n
        message = "; ".join([self._message(blocks, records), *notes])
        return IngestResult(self.history.ds.id, blocks[-1] if blocks else None, records,
                            self.history.watermark, message, blocks, notes)

    def _message(self, blocks: list[bytes], records: int) -> str:
        if not blocks:
            return "up to date"
        text = f"{records} new record{'s' if records != 1 else ''}"
        if records == 0 and self.history.watermark is not None:  # a block without records
            text = f"watermark advanced to {format_timestamp(self.history.watermark)}"
        return text + (f" in {len(blocks)} blocks" if len(blocks) > 1 else "")

    def _ingest(self, group: list[FetchedFile]) -> tuple[bytes | None, int]:
        from ..data.hashing import canonical_rows, sha3_of
        from ..data.slices import output_slice
        from . import slices

        system_time = self.history.next_system_time()
        table = self._read_group(group, system_time)
        name = group[0].name if len(group) == 1 else f"{group[0].name}..{group[-1].name}"
        table = self._merge(table, group[-1].event_time or system_time, name)
        table = slices.conform(table, self.history.schema(), self.vocab)

        # the watermark also moves with the source's own times (a snapshot with no changes)
        previous = self.history.watermark
        known = [previous, slices.max_event_time(table, self.vocab) if len(table) else None,
                 *(f.event_time for f in group)]
        watermark = max((t for t in known if t is not None), default=None)
        if len(table) == 0 and watermark == previous:
            return None, 0  # nothing new: no block (the fetch progress is not recorded either)

        block = MetadataBlock(system_time=system_time, output_watermark=watermark)
        data_file = None
        if len(table):
            table = slices.finish(table, system_time, self.vocab)
            data_file = self.scratch / "slice.parquet"
            # The logical hash runs while the file is written (both release the GIL). Rows of
            # one event time (one file's) are rendered first, on every core: the write then
            # overlaps the hash's sort and SHA3, which use one core.
            rows = canonical_rows(table, self.vocab.event_time, self.vocab.system_time)
            with ThreadPoolExecutor(max_workers=1) as pool:
                logical = pool.submit(sha3_of, rows)
                physical = slices.write(table, data_file)
                block = dataclasses.replace(block, output_slice=output_slice(
                    logical_hash=logical.result(), physical_hash=physical,
                    num_records=len(table), system_time=system_time))
        state = group[-1].source_state()
        h = self.writer.commit(block, data_file=data_file, source_state=state)
        self.history.committed(h, system_time, watermark, data_file is not None, state)
        if self.snapshot_state_loaded and data_file is not None:
            self._advance_snapshot_state(table)
        return h, len(table)

    def _read_group(self, group: list[FetchedFile], system_time: datetime) -> pa.Table:
        import pyarrow as pa

        from . import slices
        from .prepare import prepare
        from .read import read

        tables = []
        self.progress.start(sum(f.path.stat().st_size for f in group),
                            f"{self.history.ds.id}: {len(group)} file{'s' * (len(group) > 1)}")
        try:
            for f in group:
                path = prepare(f.path, self.source.prepare, self.scratch, f.name)
                table = read(path, self.source.read, f.name)
                if self.source.preprocess is not None:
                    assert self.preprocess is not None  # pull_root refuses the step without one
                    table = self.preprocess(table, self.source.preprocess)
                tables.append(slices.with_event_time(table, self.vocab,
                                                     f.event_time or system_time, f.name))
                self.progress.advance(f.path.stat().st_size)
        finally:
            self.progress.finish()
        return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 \
            else tables[0]

    # --- merge --------------------------------------------------------------------------------

    def _merge(self, table: pa.Table, snapshot_time: datetime, name: str) -> pa.Table:
        from . import merge

        strategy = self.source.merge
        if isinstance(strategy, MergeStrategyLedger):
            merge.check_key(table, strategy.primary_key, name)
            seen = self.history.read(columns=list(strategy.primary_key))
            return merge.ledger(table, strategy.primary_key, seen)
        if isinstance(strategy, MergeStrategySnapshot):
            roles = merge.SnapshotColumns.of(strategy)
            merge.check_key(table, roles.key, name)
            if not self.snapshot_state_loaded:
                self.snapshot_state = self.history.snapshot_state(roles)
                self.snapshot_state_loaded = True
            return merge.snapshot(self.snapshot_state, table, roles, self.vocab.event_time,
                                  snapshot_time, name)
        return table

    def _advance_snapshot_state(self, changes: pa.Table) -> None:
        """The state after this block = projection of (state before + its changes)."""
        import pyarrow as pa

        from . import merge

        assert isinstance(self.source.merge, MergeStrategySnapshot)  # only snapshot merges keep a state
        roles = merge.SnapshotColumns.of(self.source.merge)
        parts = [changes] if self.snapshot_state is None else [self.snapshot_state, changes]
        self.snapshot_state = merge.projection(
            pa.concat_tables(parts, promote_options="permissive"), roles)
        self.history.remember_snapshot_state(self.snapshot_state)
