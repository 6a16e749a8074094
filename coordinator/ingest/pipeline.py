"""``pull_root``: bring a root dataset up to date (what ``coord pull`` calls for root datasets).

One pull, under the dataset's writer lock:

    fetch → for each group of new files: prepare → read → preprocess → event time
          → merge → conform → slice (Parquet, hashes) → commit block + source state

The last step, and what the pipeline reads of the dataset, is its ``Target`` (``target.py``):
the chain in the dataset's ODF version (0.18 here, 0.39 ``ingest.current``); every other
step is the same for both.

The SQL engine, started only when asked for, runs the preprocess query and, if
``ingest.engine`` says so, reads the files (``in_engine``).

For append and ledger merges all new files of a pull form one slice, up to
``ingest.maxSliceBytes`` of read data: past that the pull commits a block and goes on, and a
file larger than that is read in pieces (``read.read_pieces``), so memory stays bounded by
the slice size whatever the input (when the coordinator reads the files, the next piece is
read in a thread with ``data.read_ahead``). An append merge keeps no state, so its slices
(without a preprocess query) commit in one background thread (``_Pull._committer``): a slice
is sorted, hashed, written and committed while the next one is read; at most one commit is
in flight, blocks commit in order, and the next slice's conform step waits for the commit
before it. For a snapshot merge each file is its own block, because each snapshot is diffed
against the state just before it; so for a 0.39 root's stream merges (changelog, upsert), as
the reference ingests them, held in memory. Files the fetch step batches (a feed's update)
form one block whatever the merge, unless the size limit splits it.

A block is committed when there are new records or the watermark moves; otherwise nothing is
written. Any error leaves the dataset as it was after its last committed block (the commit is
the last step of each block). Each block stores a ``SourceState`` (``workspace/source_state.py``):
the fetch step's progress once its records are in. A block that ends within a file or a batch
stores the progress before it plus a ``Resume``: the next pull fetches the same files again
and skips the records already in if the file is still the same (``FileIdentity``: its fetch
state, size and, read in place, modification time), so each record is ingested exactly once.
Arrow and the data steps are imported once there is something to read: nothing new costs no
Arrow.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.objects import (
    DatasetSourceRoot,
    FetchStepFilesGlob,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
)
from ..metadata.odf39.adapt import REWRITTEN_READS, STREAM_MERGES, StreamMerge
from ..metadata.odf39.source import MergeStrategyChangelogStream, MergeStrategyUpsertStream
from ..metadata.timestamps import format_timestamp, parse_timestamp
from ..workspace import DatasetState, Workspace
from ..workspace.config import IngestConfig, IngestEngine
from ..workspace.progress import NoProgress, Progress
from ..workspace.runs import run_folder
from ..workspace.source_state import FetchState, FileIdentity, Resume, SourceState
from .errors import IngestError
from .fetch import fetch
from .fetched import FetchedFile
from .taken_files import TakenFiles
from .target import Target, TargetOpener, open_018

if TYPE_CHECKING:
    import pyarrow as pa

    from ..engine.port import Engine
    from .snapshot_disk import DiskSnapshot

EngineSource = Callable[[], "Engine"]  # the command's engine, started on the first call


@dataclass(frozen=True)
class BehindWatermark:
    """Records an ingest added dated before the root's watermark as it stood before them: its
    readers may have passed that time already (a window dropping them as late, a temporal
    join's events keeping the version they met, unless the reader corrects: ``lateRows``)."""

    rows: int
    oldest: datetime  # the earliest event time among them
    watermark: datetime  # the root's watermark when the first of them came

    def words(self, dataset_id: str) -> str:
        rows, were = (f"{self.rows:,} records", "were") if self.rows != 1 else ("1 record", "was")
        return (f"{rows} of {dataset_id} {were} dated behind its watermark "
                f"{format_timestamp(self.watermark)} (the oldest {format_timestamp(self.oldest)}); "
                "readers that already passed that time may leave them out (see coord status)")


@dataclass
class IngestResult:
    dataset_id: str
    block_hash: bytes | None  # the newest block this pull committed, None if none
    num_records: int
    watermark: datetime | None
    message: str  # "3 new records", "up to date", ...
    blocks: list[bytes] = field(default_factory=list)  # every block committed, in order
    notes: list[str] = field(default_factory=list)  # the source's news (a feed's invalid updates)
    behind: BehindWatermark | None = None  # records dated behind the watermark, if any


def pull_root(ws: Workspace, dataset_id: str, *, progress: Progress | None = None,
              set_watermark: datetime | str | None = None,
              engine: EngineSource | None = None,
              state: DatasetState | None = None,
              target: TargetOpener = open_018) -> IngestResult:
    """``engine``: gives the command's SQL engine (started on first call); ``state``: the
    dataset as this command already read it (taken if still current); ``target``: where the
    records go, the dataset's chain in its ODF version (``target.py``; the steps are one)."""
    with target(ws, dataset_id, state) as into:
        if set_watermark is not None:
            return _set_watermark(into, parse_timestamp(set_watermark))
        if into.history.source.preprocess is not None and engine is None:
            raise IngestError(f"{dataset_id}: the source has a preprocess step, which needs the "
                              "SQL engine; none was given to this pull")
        with run_folder(ws.run_dir, f"ingest-{dataset_id}") as scratch:
            pull = _Pull(ws, into, scratch, progress or NoProgress(), engine)
            return pull.run()


def push_root(ws: Workspace, dataset_id: str, files: list[FetchedFile], *,
              target: TargetOpener, progress: Progress | None = None,
              engine: EngineSource | None = None) -> IngestResult:
    """Ingest ``files`` through the push source ``target`` holds (``ingest.push``): each file is
    read, preprocessed, merged and committed as one block of its own, or none when the merge
    leaves nothing new, exactly as a pull's steps do."""
    with target(ws, dataset_id, None) as into:
        if into.history.source.preprocess is not None and engine is None:
            raise IngestError(f"{dataset_id}: the source has a preprocess step, which needs the "
                              "SQL engine; none was given to this ingest")
        with run_folder(ws.run_dir, f"ingest-{dataset_id}") as scratch:
            return _Pull(ws, into, scratch, progress or NoProgress(), engine).push(files)


def _set_watermark(target: Target, t: datetime) -> IngestResult:
    history = target.history
    current = history.watermark
    if current is not None and t < current:
        raise IngestError(f"{history.ds.id}: watermark {format_timestamp(t)} is before the "
                          f"current watermark {format_timestamp(current)}")
    if t == current:
        return IngestResult(history.ds.id, None, 0, current, "watermark unchanged")
    h = target.set_watermark(t, history.next_system_time())
    return IngestResult(history.ds.id, h, 0, t, f"watermark set to {format_timestamp(t)}", [h])


@dataclass(frozen=True)
class _Piece:
    """Records of one file as read, in file order (a file is one piece unless split)."""

    file: FetchedFile
    index: int  # of the file in its group
    table: pa.Table
    rows_before: int  # the file's records in earlier pieces
    last: bool  # the file's last piece

    @property
    def end(self) -> int:
        return self.rows_before + self.table.num_rows


class _Pull:
    def __init__(self, ws: Workspace, target: Target, scratch: Path, progress: Progress,
                 engine: EngineSource | None):
        self.ws, self.target, self.history = ws, target, target.history
        history = self.history
        self.scratch, self.progress, self.engine = scratch, progress, engine
        self.config = ws.config().ingest
        self.source, self.vocab = history.source, history.vocab
        # snapshot merges: the state before the next file, loaded once, advanced per block
        self.snapshot_state: pa.Table | None = None
        self.snapshot_state_loaded = False
        # whether the records read last had their own event time (else the fetch step's)
        self.own_event_time = False
        # ledger merges: the keys seen so far, loaded once, extended per block
        self.seen_keys: pa.Table | None = None
        self.seen_keys_loaded = False
        # snapshot merges larger than a slice: diffed out of core, from the first such on
        self.disk_snapshot: DiskSnapshot | None = None
        # Append and ledger merges without a preprocess step cut a block at this size and
        # read large files in pieces; a preprocess query sees whole files. A snapshot is one
        # block, unless it goes out of core with a change set larger than this.
        self.max_slice_bytes = max_slice_bytes(self.config)
        self.split = not self._file_a_block() and self.source.preprocess is None
        self.blocks: list[bytes] = []  # committed, in order
        self.records = 0  # in those blocks
        self.behind: BehindWatermark | None = None  # those of them dated behind the watermark
        self.committer: ThreadPoolExecutor | None = None  # see _committer
        self.in_flight: Future[None] | None = None

    def run(self) -> IngestResult:
        notes: list[str] = []
        stored = self.history.state
        base = stored.fetched if stored is not None else None
        resume = stored.resume if stored is not None else None
        source = self.source
        assert isinstance(source, DatasetSourceRoot)  # a push source is ingested by ``push``
        files = fetch(source.fetch, root=self.ws.root, scratch=self.scratch,
                      state=base, progress=self.progress, notes=notes)
        taken = None
        if isinstance(source.fetch, FetchStepFilesGlob):
            taken = TakenFiles(self.ws, self.history.ds.id)
            notes += taken.changed(source.fetch, source.merge, files)
        if files and files[0].batch is not None:
            groups = [list(g) for _, g in itertools.groupby(files, key=lambda f: f.batch)]
        else:
            groups = [[f] for f in files] if self._file_a_block() else [files] if files else []
        try:
            with self._committer():
                for k, group in enumerate(groups):
                    skip = _resume_point(group, resume, self.scratch, notes) \
                        if k == 0 and resume is not None else (0, 0)
                    self._ingest(group, base, skip)
                    base = group[-1].source_state()
        finally:
            if self.disk_snapshot is not None:
                self.disk_snapshot.close()
        if taken is not None:
            taken.remember(files)
        return self._result(notes)

    def push(self, files: Iterable[FetchedFile]) -> IngestResult:
        """Each file whole, as one block (a push keeps no fetch state to resume a file from).
        A file's event time only fills records without one: unlike a polled file's, it does
        not move the watermark by itself (the reference's ``source_event_time``)."""
        for f in files:
            system_time = self.history.next_system_time()
            unstamped = dataclasses.replace(f, event_time=None)
            pieces = [dataclasses.replace(self._prepared(p, system_time), file=unstamped)
                      for p in self._pieces([f], (0, 0), split=False)]
            self._commit(pieces, system_time, SourceState(None))
        return self._result([])

    def _result(self, notes: list[str]) -> IngestResult:
        blocks = self.blocks
        message = "; ".join([self._message(blocks, self.records), *notes])
        return IngestResult(self.history.ds.id, blocks[-1] if blocks else None, self.records,
                            self.history.watermark, message, blocks, notes, self.behind)

    def _message(self, blocks: list[bytes], records: int) -> str:
        if not blocks:
            return "up to date"
        text = f"{records} new record{'s' if records != 1 else ''}"
        if records == 0 and self.history.watermark is not None:  # a block without records
            text = f"watermark advanced to {format_timestamp(self.history.watermark)}"
        return text + (f" in {len(blocks)} blocks" if len(blocks) > 1 else "")

    def _ingest(self, group: list[FetchedFile], base: FetchState | None,
                skip: tuple[int, int]) -> None:
        """Commit the group's records: one block, or one per ``max_slice_bytes`` of them, each
        with the source state that resumes after its last record."""
        if self._snapshot_on_disk(group):
            self._ingest_snapshot_on_disk(group, base)
            return
        from ..data import read_ahead

        pending: list[_Piece] = []
        size, system_time = 0, None
        pieces = self._pieces(group, skip, self.split)
        # the next piece is read while a slice is sorted, hashed and written
        for piece in read_ahead(pieces, 1) if self._read_here(group) else pieces:
            if system_time is None:
                system_time = self.history.next_system_time()
            pending.append(self._prepared(piece, system_time))
            size += pending[-1].table.nbytes
            if self.split and size >= self.max_slice_bytes:
                self._commit(pending, system_time, _state_at(group, base, piece, self.scratch))
                pending, size, system_time = [], 0, None
        if pending:
            assert system_time is not None
            self._commit(pending, system_time, SourceState(group[-1].source_state()))

    def _read_here(self, group: list[FetchedFile]) -> bool:
        """Whether this process reads every file of the group itself (then they may be read
        ahead in a thread), none by the engine: an engine started from a thread would die
        when that thread ends (its sandbox's parent-death signal follows the thread)."""
        from . import in_engine

        if self.config.engine is IngestEngine.COORDINATOR or not in_engine.can_read(self.source.read):
            return True
        # a prepared or rewritten file's size, which decides, is known only then
        if self.source.prepare or isinstance(self.history.given_read, REWRITTEN_READS):
            return False
        return not any(self.config.reads_in_engine(f.path.stat().st_size) for f in group)

    def _file_a_block(self) -> bool:
        """Whether each file is merged whole, as its own block: a snapshot (diffed against
        the state just before it) and a stream (the reference ingests a file at a time, so
        an upsert's intermediate values and a changelog's pairs are kept as it keeps them)."""
        return isinstance(self.source.merge, (MergeStrategySnapshot, *STREAM_MERGES))

    def _prepared(self, piece: _Piece, system_time: datetime) -> _Piece:
        """The piece through the preprocess query, with its event time column, its times
        checked (``bounds``)."""
        from . import slice_layout
        from .bounds import check_horizon, check_source_time, check_time_range

        table = piece.table
        if self.source.preprocess is not None:
            from .in_engine import run_preprocess

            assert self.engine is not None  # pull_root refuses the step without one
            table = run_preprocess(self.engine(), self.history.ds.id, table, self.source.preprocess)
        self.own_event_time = self.vocab.event_time in table.column_names
        f, event_time = piece.file, [self.vocab.event_time]
        check_time_range(table, f.name, piece.rows_before)
        table = slice_layout.with_event_time(table, self.vocab, f.event_time or system_time,
                                             f.name, piece.rows_before)
        if self.own_event_time:  # text read as times just now
            check_time_range(table, f.name, piece.rows_before, event_time)
        elif f.event_time is not None:  # every record has the time given for the file
            check_source_time(f.event_time, system_time, self.config.event_time_horizon_s, f.name)
        check_horizon(table, event_time[0], system_time, self.config.event_time_horizon_s, f.name,
                      piece.rows_before)
        with _naming(f.name):
            return dataclasses.replace(piece, table=self.target.stored_types(table))

    def _snapshot_on_disk(self, group: list[FetchedFile]) -> bool:
        """Whether this snapshot is larger than a quarter of a slice (merged in memory, it is
        held several times over: read, diffed, rendered for the hash), or the state it is
        diffed against larger than a slice; once a pull has gone out of core it stays there
        (the state lives on disk)."""
        if self.disk_snapshot is None and isinstance(self.source.merge, MergeStrategySnapshot) \
                and (4 * sum(f.path.stat().st_size for f in group) > self.max_slice_bytes
                     or self.history.snapshot_state_bytes() > self.max_slice_bytes):
            from .snapshot_disk import DiskSnapshot

            self.disk_snapshot = DiskSnapshot(self.history,
                                              self.history.snapshot_roles(self.source.merge),
                                              self.scratch, 2 * self.max_slice_bytes)
        return self.disk_snapshot is not None

    def _ingest_snapshot_on_disk(self, group: list[FetchedFile],
                                 base: FetchState | None) -> None:
        """One block per slice of the change set; all but the last keep the state ``base``
        from before the snapshot (see ``snapshot_disk``)."""
        assert self.disk_snapshot is not None
        system_time = self.history.next_system_time()
        name = _names(group)
        read_times: list[datetime] = []  # each piece's latest event time, as the diff reads it

        def tables() -> Iterator[pa.Table]:
            for p in self._pieces(group, (0, 0), split=self.source.preprocess is None):
                table = self._prepared(p, system_time).table
                read_times.extend(t for t in [self._read_time(table)] if t is not None)
                yield table

        # a quarter slice: a snapshot's changes share one event time, so the hash orders
        # each block's rows by their whole text, which holds the block several times over
        changes = self.disk_snapshot.diff(
            tables(), self.vocab.event_time,
            lambda: group[-1].event_time or max(read_times, default=None) or system_time, name,
            self.max_slice_bytes // 4, lambda: self.own_event_time)
        import duckdb

        try:
            held = next(changes)  # the whole snapshot is read by then
            read = max(read_times, default=None)
            for table in changes:
                self._commit_table(held, group, name, system_time, SourceState(base), read)
                held, system_time = table, self.history.next_system_time()
            self._commit_table(held, group, name, system_time,
                               SourceState(group[-1].source_state()), read)
            self.disk_snapshot.current_state()
        except duckdb.Error as e:  # blocks already committed stay; the next pull goes on
            raise IngestError(f"{name}: the out-of-core snapshot merge failed: "
                              f"{str(e).splitlines()[0]}; give it more memory (coord config set "
                              "ingest.maxSliceBytes, DuckDB gets two slices) or more disk under "
                              ".coord/run, and pull again") from None

    def _pieces(self, group: list[FetchedFile], skip: tuple[int, int],
                split: bool) -> Iterator[_Piece]:
        """The group's records in order, from file ``skip[0]`` on, less that file's first
        ``skip[1]`` (which an earlier pull ingested); large files in pieces if ``split``."""
        from .prepare import prepare
        from .reshape import rewritten

        skip_files, skip_rows = skip
        self.progress.start(sum(f.path.stat().st_size for f in group[skip_files:]),
                            f"{self.history.ds.id}: {len(group)} file{'s' * (len(group) > 1)}")
        try:
            for i, f in enumerate(group[skip_files:], start=skip_files):
                path = prepare(f.path, self.source.prepare, self.scratch, f.name)
                path = rewritten(path, self.history.given_read, self.scratch, f.name)
                tables = self._read(path, f.name, split)
                drop = skip_rows if i == skip_files else 0
                rows, held = 0, None  # the file's records read so far; the piece not yet given
                for table in tables:
                    start, rows = rows, rows + table.num_rows
                    if drop > start:  # records an earlier pull took
                        table = table.slice(min(drop - start, table.num_rows))
                    if held is not None:
                        yield dataclasses.replace(held, last=False)
                    held = _Piece(f, i, table, rows - table.num_rows, last=True)
                assert held is not None  # a file reads as one table at least
                yield held
                self.progress.advance(f.path.stat().st_size)
        finally:
            self.progress.finish()

    def _read(self, path: Path, name: str, split: bool) -> Iterator[pa.Table]:
        """A prepared file's records, by the coordinator or by the engine (``in_engine``)."""
        from . import in_engine
        from .read import read, read_pieces

        step, piece_bytes = self.source.read, _piece_bytes(self.max_slice_bytes)
        if self.config.reads_in_engine(path.stat().st_size) and in_engine.can_read(step):
            if self.engine is None:
                raise IngestError(f"{name}: ingest.engine asks the SQL engine to read it; none "
                                  "was given to this pull")
            private = path.resolve().is_relative_to(self.scratch.resolve())
            tables = in_engine.read_in_engine(self.engine(), self.history.ds.id, path, step,
                                              name, piece_bytes, private)
            if split:
                return tables
            import pyarrow as pa

            return iter([pa.concat_tables(list(tables))])
        reference = self.history.reference_reading  # a current-ODF dataset's file
        return read_pieces(path, step, name, piece_bytes, reference=reference) if split \
            else iter([read(path, step, name, reference=reference)])

    def _commit(self, pieces: list[_Piece], system_time: datetime, state: SourceState) -> None:
        """Merge, hash, write and commit one slice of ``pieces`` (if there is anything new)."""
        import pyarrow as pa

        tables = [p.table for p in pieces]
        table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 \
            else tables[0]
        files = list({id(p.file): p.file for p in pieces}.values())
        name = _names(files)
        read = self._read_time(table)
        table = self._merge(table, files[-1].event_time or read or system_time, name)
        self._commit_table(table, files, name, system_time, state, read)

    def _read_time(self, table: pa.Table) -> datetime | None:
        """The latest event time of a snapshot's or a stream batch's records as read, before
        the merge: its block's watermark moves to it even where the merge keeps none of them
        (a snapshot or push that only removes keys: a current-ODF retraction carries the
        removed record's event time), so the watermark says when the block's removals took
        effect (``query.state``'s AS OF). None for the other merges."""
        from . import slice_layout

        if not self._file_a_block() or not len(table):
            return None
        return slice_layout.max_event_time(table, self.vocab)

    def _commit_table(self, table: pa.Table, files: list[FetchedFile], name: str,
                      system_time: datetime, state: SourceState, read: datetime | None = None) -> None:
        """Conform and commit the merged records of ``files`` (``name``: theirs, for
        messages): in the committer thread when there is one (``_committer``), else here;
        ``read``: the latest event time the merge read (``_read_time``), counted in the
        watermark of a block with records."""
        from . import slice_layout
        from .bounds import check_source_time

        self._settle()  # the schema, watermark and offsets as of the block before
        table = slice_layout.conform(table, self.history.schema(), self.vocab, self.history.ds.id,
                                     name)
        # the watermark also moves with the source's own times (a snapshot with no changes)
        for f in files:
            if f.event_time is not None:
                check_source_time(f.event_time, system_time, self.config.event_time_horizon_s,
                                  f.name)
        previous = self.history.watermark
        self._count_behind(table, previous)
        known = [previous, *((slice_layout.max_event_time(table, self.vocab), read) if len(table) else ()),
                 *(f.event_time for f in files)]
        watermark = max((t for t in known if t is not None), default=None)
        if len(table) == 0 and watermark == previous:
            return  # nothing new: no block (the fetch progress is not recorded either)
        if self.committer is None:
            self._commit_now(table, system_time, watermark, state, name)
        else:
            self.in_flight = self.committer.submit(self._commit_now, table, system_time,
                                                   watermark, state, name)

    def _count_behind(self, table: pa.Table, watermark: datetime | None) -> None:
        """Count the records of ``table`` that add a value dated before ``watermark`` (a
        removal or a correction's old half repeats the old record's time: not late)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if watermark is None or not len(table):
            return
        if isinstance(self.source.merge, MergeStrategySnapshot | StreamMerge):
            roles = self.history.snapshot_roles(self.source.merge)
            observed = table[roles.observation]
            adds = pc.is_in(observed, pa.array([roles.added, roles.changed], observed.type))
            table = table.filter(pc.fill_null(adds, True))
        times = pc.cast(table[self.vocab.event_time], pa.timestamp("us", tz="UTC"))
        late = pc.filter(times, pc.fill_null(pc.less(times, pa.scalar(watermark, times.type)), False))
        if not len(late):
            return
        oldest = pc.min(late).as_py()
        before = self.behind
        self.behind = BehindWatermark(
            len(late) + (before.rows if before else 0),
            min(oldest, before.oldest) if before else oldest,
            before.watermark if before else watermark)

    def _commit_now(self, table: pa.Table, system_time: datetime, watermark: datetime | None,
                    state: SourceState, name: str) -> None:
        with _naming(name):
            h, stored = self.target.commit(table, system_time, watermark, state, self.scratch)
        if len(stored):
            self._advance_states(stored)
        self.blocks.append(h)
        self.records += len(stored)

    @contextmanager
    def _committer(self) -> Iterator[None]:
        """Where an append source's slices commit: in one background thread, so a slice is
        written and hashed while the next one is read and merged (the merge keeps no state).
        At most one commit is in flight, and the next slice's conform waits for it
        (``_settle``), so blocks commit in order and each step reads the history as of the
        block before; what runs meanwhile reads nothing the commit changes (the system time
        is reserved when handed out: ``DatasetHistory.next_system_time``). On an error the
        commit in flight is finished before the writer's lock is let go."""
        if not isinstance(self.source.merge, MergeStrategyAppend) or not self.split:
            yield
            return
        with ThreadPoolExecutor(1, thread_name_prefix="commit") as self.committer:
            try:
                yield
                self._settle()
            finally:
                self.committer = None

    def _settle(self) -> None:
        """Wait for the commit in flight, if any; its error is the pull's."""
        if self.in_flight is not None:
            in_flight, self.in_flight = self.in_flight, None
            in_flight.result()

    # --- merge --------------------------------------------------------------------------------

    def _merge(self, table: pa.Table, snapshot_time: datetime, name: str) -> pa.Table:
        from . import merge

        strategy = self.source.merge
        if isinstance(strategy, MergeStrategyLedger):
            merge.check_key(table, strategy.primary_key, name)
            if not self.seen_keys_loaded:
                self.seen_keys = self.history.read(columns=list(strategy.primary_key))
                self.seen_keys_loaded = True
            return merge.ledger(table, strategy.primary_key, self.seen_keys)
        if isinstance(strategy, MergeStrategySnapshot | StreamMerge):
            roles = self.history.snapshot_roles(strategy)
            if not self.snapshot_state_loaded:
                self.snapshot_state = self.history.snapshot_state(roles)
                self.snapshot_state_loaded = True
            if isinstance(strategy, MergeStrategyChangelogStream):
                return merge.check_changelog(self.snapshot_state, table, roles,
                                             self.vocab.event_time, name, self.own_event_time)
            if isinstance(strategy, MergeStrategyUpsertStream):
                return merge.upsert(self.snapshot_state, table, roles, self.vocab.event_time,
                                    snapshot_time, name, self.own_event_time)
            merge.check_key(table, roles.key, name)
            return merge.snapshot(self.snapshot_state, table, roles, self.vocab.event_time,
                                  snapshot_time, name, self.own_event_time)
        return table

    def _advance_states(self, committed: pa.Table) -> None:
        """After a block: the keys seen (ledger), or the state = projection of (state before +
        the block's changes) (snapshot), where this pull has loaded them."""
        import pyarrow as pa

        from . import merge

        strategy = self.source.merge
        if self.disk_snapshot is not None:
            return  # its state is rebuilt once all of a snapshot's blocks are committed
        if isinstance(strategy, MergeStrategyLedger) and self.seen_keys_loaded:
            keys = committed.select(list(strategy.primary_key))
            parts = [keys] if self.seen_keys is None else [self.seen_keys, keys]
            self.seen_keys = pa.concat_tables(parts, promote_options="permissive")
        elif isinstance(strategy, MergeStrategySnapshot | StreamMerge) and self.snapshot_state_loaded:
            roles = self.history.snapshot_roles(strategy)
            parts = [committed] if self.snapshot_state is None else [self.snapshot_state, committed]
            self.snapshot_state = merge.projection(
                pa.concat_tables(parts, promote_options="permissive"), roles)
            self.history.remember_snapshot_state(self.snapshot_state)


def _names(files: list[FetchedFile]) -> str:
    """The files of a slice, for messages: one name, or the first and last."""
    return files[0].name if len(files) == 1 else f"{files[0].name}..{files[-1].name}"


@contextmanager
def _naming(name: str) -> Iterator[None]:
    """Records a slice cannot store (a type, a system column's name) are refused in one line
    that names the files they came from (a schema change names them in its own words:
    ``slice_layout.conform``)."""
    from ..errors import Invalid

    try:
        yield
    except Invalid as e:
        raise type(e)(f"{name}: {e}") from None


def max_slice_bytes(config: IngestConfig) -> int:
    """``ingest.maxSliceBytes``, or for ``auto`` 1/128 of the machine's memory within
    [64 MiB, 128 MiB]: a pull's peak memory is about six times its slice (the slice read,
    sorted, rendered for the hash and encoded while the next one is read, ``_committer``),
    which keeps a 0.18 root's pull under 1 GB (docs/benchmarks.md)."""
    configured = config.max_slice_bytes
    if configured is not None:
        return configured
    import os

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(max(memory // 128, 64 << 20), 128 << 20)


def _piece_bytes(max_slice_bytes: int) -> int:
    """How much of a large file is read at once: a slice in a few pieces, so the slice
    limit is overshot by little."""
    return max(1 << 20, min(max_slice_bytes // 4, 64 << 20))


def _state_at(group: list[FetchedFile], base: FetchState | None, piece: _Piece,
              scratch: Path) -> SourceState:
    """The source state once ``piece`` and all before it are ingested: a file's own state
    when it was the last of its group or the group is not a batch, else the state before
    the file (or the batch) plus where to resume."""
    f, i, records = piece.file, piece.index, piece.end
    batch = f.batch is not None
    if piece.last:
        if not batch or i == len(group) - 1:
            return SourceState(f.source_state())
        f, i, records = group[i + 1], i + 1, 0
    before = group[i - 1].source_state() if i > 0 and not batch else base
    return SourceState(before, Resume(f.name, records, _identity(f, scratch)))


def _identity(f: FetchedFile, scratch: Path) -> FileIdentity:
    """What tells the file apart from a changed one: its source state, its size, and for a
    file read in place (not downloaded to ``scratch``) its modification time, since a glob's
    state is only its name."""
    st, state = f.path.stat(), f.source_state()
    assert state is not None  # a fetched file (only a pushed one has none, and never resumes)
    local = not f.path.is_relative_to(scratch)
    return FileIdentity(state, st.st_size, st.st_mtime_ns if local else None)


def _resume_point(group: list[FetchedFile], resume: Resume, scratch: Path,
                  notes: list[str]) -> tuple[int, int]:
    """(files to skip, records of the next file to skip) where an earlier pull stopped
    within a file, if that file is still the same; else everything is ingested."""
    name, records = resume.file, resume.records
    for i, f in enumerate(group):
        if f.name == name:
            if _identity(f, scratch) == resume.of:
                return i, records
            break
    notes.append(f"{name} is gone or changed since an earlier pull ingested its first {records} "
                 "records; what the source holds now is ingested whole")
    return 0, 0
