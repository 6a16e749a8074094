"""The build service of ``coord serve``: keeps every dataset of a workspace up to date.

One thread works through a queue of datasets to pull, inputs before their readers:

- a root enters the queue when its poll interval has passed (``serve.poll``), when the
  folder watcher sees a file its source would take, or when the API asks;
- a dataset that committed a block puts its readers in the queue;
- at start every dataset is in the queue, so the queue is derived from the chains: the
  pulls themselves find what is out of date (new files, input blocks not consumed), and a
  restart loses nothing and, the commit protocol being exactly-once, redoes nothing.

Invariants:
- The queue is a set: a dataset marked several times before it runs is pulled once, and one
  pull consumes every input block committed meanwhile (pending updates coalesce).
- Order: the next dataset taken is the earliest due one in the workspace's dependency order.
- One engine, started on first need and kept warm while there is work; it stops after
  ``serve.engineIdle`` without any, and after an error that may have come from it.
- The engine reads (read-only) what the derivatives this service computes read, as
  ``coord pull`` of them would (``engine_reads``): those derivatives and their inputs, no
  other dataset (not the roots no derivative reads, not the datasets pulled from a
  repository that none reads). That set is fixed while the service runs, since the
  workspace's datasets are (the serve lease refuses ``coord add``); a restarted service
  reads it again. An engine job that needs more (provenance of an older query's block, of a
  dataset pulled from a repository) restarts the engine with that too; the next engine
  after an idle stop reads the service's set again.
- What the API shows of a served dataset, its ``DatasetView`` (state, last error, and the chain's
  summary as of the last build: head, records...), is one immutable object, replaced whole
  (``view``): a build's new head and the clearing of its error are seen together, never the
  new records with the old error.
- A failing dataset is recorded (message, attempts), held back with exponential backoff
  (1 s, 2 s, 4 s ... up to ``serve.retryMax``) and retried; the others go on meanwhile.
- ``stop`` lets the current pull finish (its commit completes, or never starts) and returns.
  A service killed outright leaves what the commit protocol leaves: the previous head.
- Datasets pulled from a repository are not touched (they are updated from there).
- A dataset is pulled as ``coord pull`` pulls it (``build.pull.pull_one``); the scheduling,
  events and retries around it are this service's.
- Other engine work (record provenance for the API) runs on the worker thread too, between
  pulls, with the same warm engine: ``with_engine``; so does a push from the API (``push``),
  whose commit puts the dataset's readers in the queue as a pull's does.
"""
from __future__ import annotations

import enum
import functools
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..build.pull import pull_one
from ..engine.client import EngineError
from ..engine.port import Engine, EngineErrorKind
from ..engine.session import EngineOnDemand, engine_reads
from ..errors import CoordError, Unavailable
from ..metadata.timestamps import format_timestamp, now_utc
from ..repository import pull_source
from ..store.overview import CurrentDatasets, Overview, overview
from ..workspace import Workspace
from ..workspace.config import ServeConfig
from ..workspace.graph import DatasetGraph
from .events import EventBus

if TYPE_CHECKING:
    from ..ingest.pipeline import IngestResult


class State(enum.Enum):
    IDLE = "idle"
    QUEUED = "queued"
    RUNNING = "running"
    FAILED = "failed"  # held back until its retry is due


@dataclass(frozen=True)
class Failure:
    message: str
    attempts: int
    at: datetime
    retry_in_s: float


@dataclass(frozen=True)
class DatasetView:
    """What the API shows of a served dataset, as of one moment of the service."""

    state: State
    failure: Failure | None
    summary: Overview | None  # the chain after the last build; None before one (read the chain)


class WorkQueue:
    """Datasets waiting to be pulled: a set (marking twice is once), taken in dependency
    order, a dataset held back for a retry only once that retry is due."""

    def __init__(self, order: list[str]):
        self._rank = {d: i for i, d in enumerate(order)}
        self._pending: set[str] = set()
        self._held: dict[str, float] = {}  # dataset -> when it may run again (monotonic)

    def mark(self, *ids: str) -> None:
        self._pending.update(i for i in ids if i in self._rank)

    def hold(self, dataset_id: str, until: float) -> None:
        self._pending.add(dataset_id)
        self._held[dataset_id] = until

    def release(self, dataset_id: str) -> None:
        self._held.pop(dataset_id, None)

    def take(self, now: float) -> str | None:
        due = [d for d in self._pending if self._held.get(d, now) <= now]
        if not due:
            return None
        first = min(due, key=self._rank.__getitem__)
        self._pending.discard(first)
        return first

    def pending(self) -> set[str]:
        return set(self._pending)

    def next_retry(self) -> float | None:
        times = [t for d, t in self._held.items() if d in self._pending]
        return min(times) if times else None


class BuildService:
    def __init__(self, ws: Workspace, settings: ServeConfig, bus: EventBus,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], datetime] = now_utc):
        self.ws, self.settings, self.bus, self._clock, self._wall = ws, settings, bus, clock, wall
        current = CurrentDatasets(ws)
        graph = DatasetGraph(ws, current=current.inputs)
        self.managed = [d for d in graph.order(graph.ids(), recursive=False)
                        if pull_source(ws, d) is None]
        self.roots = [d for d in self.managed if (current.overview(d).kind if current.holds(d)
                                                  else graph.state(d).kind) == "root"]
        self._readers = {d: [r for r in graph.readers(d) if r in self.managed] for d in self.managed}
        self._service_reads = frozenset(engine_reads(ws, self.managed, graph=graph))
        self._engine_reads = self._service_reads  # what the current (or next) engine reads
        self._lock = threading.Lock()  # guards the queue, the states and the failures
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._queue = WorkQueue(self.managed)
        self._queue.mark(*self.managed)  # everything once at start: the chains say what is due
        self._states = dict.fromkeys(self.managed, State.QUEUED)
        self._failures: dict[str, Failure] = {}
        self._summaries: dict[str, Overview] = {}
        # what the API reads: replaced whole, under ``_lock``, by ``_set_state``
        self._views = {d: DatasetView(State.QUEUED, None, None) for d in self.managed}
        now = clock()
        self._next_poll = {d: now + settings.poll_of(d).next_delay(wall()) for d in self.roots}
        self._thread = threading.Thread(target=self._run, name="build-service", daemon=True)
        self._stack = ExitStack()
        self._engine: EngineOnDemand | None = None
        self._engine_used = 0.0
        self._engine_jobs: queue.SimpleQueue[
            tuple[Callable[[Callable[[], Engine]], Any], frozenset[str], Future]] = queue.SimpleQueue()

    # --- control (any thread) -----------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Finish the current pull, stop the engine, return."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def request(self, *ids: str) -> list[str]:
        """Put datasets in the queue now (a watched file appeared, the API asked), failing ones
        included: something changed, so their retry need not wait. Returns the ones this
        service manages."""
        taken = [d for d in ids if d in self._states]
        with self._lock:
            self._queue.mark(*taken)
            for d in taken:
                self._queue.release(d)
            for d in taken:
                if self._states[d] is State.IDLE:
                    self._set_state(d, State.QUEUED)
        self._wake.set()
        return taken

    def with_engine(self, job: Callable[[Callable[[], Engine]], Any], reads: Iterable[str] = ()) -> Future:
        """Run ``job(engine)`` on the worker thread with the warm engine, between pulls; the
        engine it gets can read the datasets ``reads`` names too (``engine_reads``)."""
        done: Future = Future()
        if self._stopping.is_set():
            done.set_exception(Unavailable("the service is stopping"))
            return done
        self._engine_jobs.put((job, frozenset(reads), done))
        self._wake.set()
        return done

    def push(self, dataset_id: str, ingest: Callable[[Callable[[], Engine]], IngestResult]) -> Future:
        """Run ``ingest(engine)`` (a push into ``dataset_id``, ``ingest.push``) on the worker
        thread, between pulls; a commit is announced and puts the dataset's readers in the
        queue, as a pull's does."""
        def job(engine: Callable[[], Engine]) -> IngestResult:
            started = time.time()
            result = ingest(engine)
            if result.blocks:
                summary = self._summary(dataset_id)
                with self._lock:
                    self._summaries[dataset_id] = summary
                    self._set_state(dataset_id, self._states[dataset_id])
                self._committed(dataset_id, result.blocks, result.message, started, summary, [])
                with self._lock:
                    self._queue.mark(*self._readers.get(dataset_id, ()))
                    for reader in self._readers.get(dataset_id, ()):
                        if self._states[reader] is State.IDLE:
                            self._set_state(reader, State.QUEUED)
            return result

        return self.with_engine(job, reads=[dataset_id])

    def view(self, dataset_id: str) -> DatasetView | None:
        """What the API shows of the dataset (None: not served); an immutable snapshot."""
        return self._views.get(dataset_id)

    # --- the worker thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._run_engine_jobs()
                dataset_id = self._next()
                if dataset_id is None:
                    self._idle()
                else:
                    self._pull(dataset_id)
        finally:
            self._close_engine()
            while not self._engine_jobs.empty():
                *_, done = self._engine_jobs.get()
                done.set_exception(Unavailable("the service stopped"))

    def _run_engine_jobs(self) -> None:
        while not self._engine_jobs.empty():
            job, reads, done = self._engine_jobs.get()
            try:
                done.set_result(job(functools.partial(self._warm_engine, reads)))
            except Exception as e:  # the caller gets it; the service goes on
                done.set_exception(e)
            finally:
                if self._engine is not None:
                    self._engine_used = self._clock()

    def _next(self) -> str | None:
        now = self._clock()
        with self._lock:
            for d, due in self._next_poll.items():
                if due <= now:
                    self._queue.mark(d)
                    self._next_poll[d] = now + self.settings.poll_of(d).next_delay(self._wall())
            return self._queue.take(now)

    def _idle(self) -> None:
        now = self._clock()
        deadlines = list(self._next_poll.values())
        with self._lock:
            retry = self._queue.next_retry()
        if retry is not None:
            deadlines.append(retry)
        if self._engine is not None:
            idle_end = self._engine_used + self.settings.engine_idle_s
            if idle_end <= now:
                self._close_engine()
            else:
                deadlines.append(idle_end)
        wait = max(0.0, min(deadlines, default=60.0) - now)
        self._wake.wait(min(wait, 60.0))
        self._wake.clear()

    def _pull(self, dataset_id: str) -> None:
        with self._lock:
            self._set_state(dataset_id, State.RUNNING)
        started = time.time()
        used = False

        def engine() -> Engine:
            nonlocal used
            used = True
            return self._warm().get()

        try:
            outcome = pull_one(self.ws, dataset_id, engine)
            committed, message, warnings = outcome.blocks, outcome.message, outcome.warnings
        except Exception as e:  # a dataset's failure never stops the service
            self._failed(dataset_id, e)
            return
        finally:
            if used and self._engine is not None:  # a root's poll is no use of the engine
                self._engine_used = self._clock()
        summary = self._summary(dataset_id) if committed else None
        with self._lock:  # the new head and the error cleared: one new view (see the module doc)
            self._failures.pop(dataset_id, None)
            if summary is not None:
                self._summaries[dataset_id] = summary
            self._queue.release(dataset_id)
            if committed:
                self._queue.mark(*self._readers[dataset_id])
                for reader in self._readers[dataset_id]:
                    if self._states[reader] is State.IDLE:
                        self._set_state(reader, State.QUEUED)
            queued = dataset_id in self._queue.pending()
            self._set_state(dataset_id, State.QUEUED if queued else State.IDLE)
        if summary is not None:
            self._committed(dataset_id, committed, message, started, summary, warnings)
            print(f"coord serve: {dataset_id}: {message} ({len(committed)} "
                  f"block{'s' if len(committed) > 1 else ''}, {time.time() - started:.1f} s)",
                  file=sys.stderr, flush=True)
            for warning in warnings:
                print(f"coord serve: warning: {dataset_id}: {warning}", file=sys.stderr, flush=True)

    def _summary(self, dataset_id: str) -> Overview:
        return overview(self.ws, dataset_id, CurrentDatasets(self.ws))

    def _committed(self, dataset_id: str, blocks: list[bytes], message: str, started: float,
                   summary: Overview, warnings: list[str]) -> None:
        self.bus.publish("commit", {
            "dataset": dataset_id, "head": summary.head, "blocks": [b.hex() for b in blocks],
            "records": summary.num_records,
            "watermark": format_timestamp(summary.watermark) if summary.watermark else None,
            "message": message, "warnings": warnings, "started": started, "finished": time.time(),
        })

    def _failed(self, dataset_id: str, error: Exception) -> None:
        ours = isinstance(error, CoordError | OSError)
        if not ours:  # a bug: the traceback goes to the service's log, the message to the API
            traceback.print_exc(file=sys.stderr)
        broken = (EngineErrorKind.UNAVAILABLE, EngineErrorKind.INTERNAL)
        if not ours or (isinstance(error, EngineError) and error.kind in broken):
            self._close_engine()  # it may be the engine that broke: the retry starts a new one
        message = str(error) if ours else f"internal error: {type(error).__name__}: {error}"
        try:  # a pull may have committed blocks before it failed
            summary: Overview | None = self._summary(dataset_id)
        except (CoordError, OSError):
            summary = None  # the API reads the chain itself, and says what is wrong with it
        with self._lock:
            if summary is not None:
                self._summaries[dataset_id] = summary
            else:
                self._summaries.pop(dataset_id, None)
            previous = self._failures.get(dataset_id)
            attempts = previous.attempts + 1 if previous else 1
            delay = min(2.0 ** (attempts - 1), self.settings.retry_max_s)
            self._failures[dataset_id] = Failure(message, attempts, now_utc(), delay)
            self._queue.hold(dataset_id, self._clock() + delay)
            self._set_state(dataset_id, State.FAILED)
        print(f"coord serve: {dataset_id}: {message} (attempt {attempts}, retry in {delay:g} s)",
              file=sys.stderr, flush=True)

    def _set_state(self, dataset_id: str, state: State) -> None:
        """(Under ``_lock``.) Record the dataset's state, publish its view (with its failure
        and summary as they are now) and announce a change of state."""
        failure = self._failures.get(dataset_id)
        self._views[dataset_id] = DatasetView(state, failure, self._summaries.get(dataset_id))
        if self._states.get(dataset_id) is state:
            return
        self._states[dataset_id] = state
        self.bus.publish("state", {"dataset": dataset_id, "state": state.value,
                                   "error": failure.message if failure else None})

    # --- the warm engine ----------------------------------------------------------------------

    def _warm(self, reads: frozenset[str] = frozenset()) -> EngineOnDemand:
        """The warm engine, able to read ``reads`` besides the service's set: restarted with
        them when the running one cannot (a running engine's mounts cannot grow)."""
        if not reads <= self._engine_reads:
            self._close_engine()
            self._engine_reads = self._service_reads | reads
        if self._engine is None:
            readable = sorted(self._engine_reads)
            self._engine = EngineOnDemand(self.ws, self._stack, lambda: readable)
        return self._engine

    def _warm_engine(self, reads: frozenset[str]) -> Engine:
        return self._warm(reads).get()

    def _close_engine(self) -> None:
        self._engine_reads = self._service_reads
        if self._engine is not None:
            self._engine = None
            self._stack.close()
            self._stack = ExitStack()

    @property
    def engine_running(self) -> bool:
        return self._engine is not None and self._engine.identity is not None
