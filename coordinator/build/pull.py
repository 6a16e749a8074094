"""``coord pull``: bring datasets up to date, upstream first, with one engine for the command.

Each dataset is pulled by the service that fits it: one that came from a repository by the
repository sync, a root dataset by ingest, a derivative by the transform service. The engine
is started at most once, on first need, and stopped when the command ends. ``pull_one`` is
that choice for one dataset; ``coord serve``'s build service calls it too.

Each dataset's chain is read once per command: the graph that orders the pull reads it (a
current-ODF one through ``CurrentDatasets``) and hands it down to the writer that pulls the
dataset, which takes it if its head has not moved since.

A pull keeps going past a dataset that fails (a ``CoordError`` or the machine's ``OSError``:
something the user can act on; a bug still stops the command): the datasets that read it,
directly or not, are skipped, every other one is pulled, and each outcome says which it was
(a failed one holds its error).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING

from ..engine.session import EngineOnDemand, engine_reads
from ..errors import CoordError, Invalid
from ..metadata.ids import DatasetRef
from ..metadata.objects import DatasetSourceRoot
from ..repository.registry import pull_source
from ..workspace import DatasetNotFound, DatasetState, Workspace
from ..workspace.config import OdfVersion
from ..workspace.graph import DatasetGraph, inputs_in_force
from ..workspace.progress import PullProgress

if TYPE_CHECKING:
    from ..engine.port import Engine
    from ..ingest.pipeline import IngestResult
    from ..store.overview import CurrentDatasets
    from ..store.read import DatasetState as CurrentState
    from ..transform.execute import TransformResult

class PullStatus(StrEnum):
    PULLED = "pulled"  # brought up to date (possibly with nothing new)
    FAILED = "failed"  # its pull raised; the message is the error
    SKIPPED = "skipped"  # not tried: an input of it (direct or not) failed


@dataclass
class PullOutcome:
    """What one pull of one dataset did."""

    dataset_id: str
    message: str  # "3 new records", "up to date", "new dataset: pulling 4 blocks", an error, ...
    blocks: list[bytes] = field(default_factory=list)  # committed by ingest or transform, in order
    signers: list = field(default_factory=list)  # trust.authorship.Signer of blocks pulled from a repository
    status: PullStatus = PullStatus.PULLED
    error: CoordError | OSError | None = None  # FAILED: what stopped it
    warnings: list[str] = field(default_factory=list)  # about a derivative's query, one line each


def pull_one(
    ws: Workspace,
    dataset_id: str,
    engine: Callable[[], Engine],
    *,
    state: DatasetState | CurrentState | None = None,
    progress: PullProgress | None = None,
    set_watermark: datetime | None = None,
) -> PullOutcome:
    """Bring one dataset up to date by the service that fits it: the repository sync for one
    that came from a repository, ingest for a root, the transform service for a derivative.

    ``engine`` gives the caller's engine (started on the first call, if the pull needs one);
    ``state``: the dataset as the caller already read it, in its ODF version (read here
    otherwise; either way it is handed to the writer, which takes it if still current);
    ``set_watermark``: advance a root's watermark instead of ingesting."""
    odf18, current = (state, None) if isinstance(state, DatasetState) else (None, state)
    origin = pull_source(ws, dataset_id)
    if origin is not None:  # either ODF version: the repository sync tells them apart
        from ..repository.fetch_remote import pull_from_repository

        synced = pull_from_repository(ws, origin, as_name=dataset_id, progress=progress, known=odf18)
        return PullOutcome(dataset_id, synced.message, signers=synced.signers)
    if ws.odf_of(dataset_id) is OdfVersion.V039:
        return _pull_current(ws, dataset_id, engine, known=current, progress=progress,
                             set_watermark=set_watermark)
    state = odf18 if odf18 is not None else ws.dataset(dataset_id).state()
    if isinstance(state.source, DatasetSourceRoot):
        from ..ingest.pipeline import pull_root

        return _ingested(pull_root(ws, dataset_id, progress=progress, state=state,
                                   set_watermark=set_watermark, engine=engine))
    if set_watermark is not None:
        raise Invalid(f"{dataset_id} is a derivative: its watermark follows its inputs")
    from ..transform.execute import pull_derivative  # gRPC: only for derivatives

    return _derived(pull_derivative(ws, dataset_id, engine, progress=progress, state=state))


def _pull_current(ws: Workspace, dataset_id: str, engine: Callable[[], Engine], *,
                  known: CurrentState | None, progress: PullProgress | None,
                  set_watermark: datetime | None) -> PullOutcome:
    """``pull_one`` for a current-ODF (0.39) dataset: a root by ingest (with its own target,
    ``ingest.current``), a derivative by the transform service; ``known``: its state as the
    caller read it."""
    from ..metadata.odf39.events import DatasetKind
    from ..store.dataset import CurrentDataset

    state = known if known is not None else CurrentDataset(ws, dataset_id).state()
    if state.kind is not DatasetKind.DERIVATIVE:
        from ..ingest.current import open_current
        from ..ingest.pipeline import pull_root

        target = partial(open_current, known=state)
        if state.polling_source is None and state.push_sources:  # data comes by coord ingest
            if set_watermark is None:
                return PullOutcome(dataset_id, "up to date (fed by push sources: coord ingest)")
            from ..metadata.odf39.adapt import push_source

            target = partial(open_current, known=state, push=lambda s: push_source(s.push_sources[0]))
        return _ingested(pull_root(ws, dataset_id, progress=progress, set_watermark=set_watermark,
                                   engine=engine, target=target))
    if set_watermark is not None:
        raise Invalid(f"{dataset_id} is a derivative: its watermark follows its inputs")
    from .current_derivative import pull_current_derivative  # gRPC: only for derivatives

    return _derived(pull_current_derivative(ws, dataset_id, engine, progress=progress, known=state))


def _ingested(result: IngestResult) -> PullOutcome:
    """What a root's pull (of either ODF version) did, as a pull outcome."""
    behind = [result.behind.words(result.dataset_id)] if result.behind else []
    return PullOutcome(result.dataset_id, result.message, result.blocks, warnings=behind)


def _derived(result: TransformResult) -> PullOutcome:
    """What a derivative's step (of either ODF version) did, as a pull outcome."""
    return PullOutcome(result.dataset_id, result.message,
                       [result.block_hash] if result.block_hash else [], warnings=result.warnings)


def pull_order(ws: Workspace, graph: DatasetGraph, ids: list[str], *, recursive: bool) -> list[str]:
    """The datasets to pull, inputs before the datasets that read them."""
    for dataset_id in ids:
        if not ws.dataset(dataset_id).exists():
            raise DatasetNotFound(dataset_id)
    # a dataset that came from a repository is updated from there, not from its inputs
    return graph.order(ids, recursive=recursive,
                       follow=lambda dataset_id: pull_source(ws, dataset_id) is None)


def pull_datasets(
    ws: Workspace,
    ids: list[str],
    *,
    recursive: bool = False,
    set_watermark: datetime | None = None,
    progress_factory: Callable[[str], PullProgress] | None = None,
    report: Callable[[PullOutcome], None] = lambda outcome: None,
) -> list[PullOutcome]:
    """Pull ``ids`` (and, with ``recursive``, everything upstream of them), inputs first; each
    outcome is reported as it comes. See the module doc for a failure among several."""
    from ..store.overview import CurrentDatasets

    current = CurrentDatasets(ws)
    graph = DatasetGraph(ws, current=current.inputs)
    order = pull_order(ws, graph, ids, recursive=recursive)
    outcomes: list[PullOutcome] = []
    not_pulled: dict[str, str] = {}  # dataset -> the failed dataset that stops it
    with ExitStack() as stack:
        engine = EngineOnDemand(ws, stack, lambda: engine_reads(ws, order, graph=graph))
        for dataset_id in order:
            try:
                blocker = _failed_input(ws, graph, dataset_id, not_pulled)
                if blocker is not None:
                    not_pulled[dataset_id] = blocker
                    outcome = PullOutcome(dataset_id, f"skipped: it depends on {blocker}, which failed",
                                          status=PullStatus.SKIPPED)
                else:
                    outcome = pull_one(
                        ws, dataset_id, engine.get,
                        state=_read_once(ws, graph, current, dataset_id),
                        progress=progress_factory(dataset_id) if progress_factory else None,
                        set_watermark=set_watermark if dataset_id in ids else None,
                    )
            except (CoordError, OSError) as e:
                not_pulled[dataset_id] = dataset_id
                outcome = PullOutcome(dataset_id, str(e), status=PullStatus.FAILED, error=e)
            if set_watermark is not None and dataset_id in ids and outcome.status is PullStatus.PULLED:
                outcome.warnings += _held_readers(ws, graph, dataset_id, set_watermark, set(ids))
            report(outcome)
            outcomes.append(outcome)
    return outcomes


def _read_once(ws: Workspace, graph: DatasetGraph, current: CurrentDatasets,
               dataset_id: str) -> DatasetState | CurrentState | None:
    """The dataset's state as ordering the pull read it (0.18: the graph's; current ODF: the
    reader the graph asked for inputs), for its writer; None for a current-ODF one from a
    repository, whose sync reads it itself."""
    if ws.odf_of(dataset_id) is OdfVersion.V018:
        return graph.state(dataset_id)
    return current.state(dataset_id) if pull_source(ws, dataset_id) is None else None


def _held_readers(ws: Workspace, graph: DatasetGraph, dataset_id: str, watermark: datetime,
                  also_set: set[str]) -> list[str]:
    """One line per reader of ``dataset_id`` whose watermark cannot follow its new
    ``watermark``: a derivative's is never past its least input's, so another input behind it
    (or without one) holds it, and a temporal join's events wait for that table. The inputs
    this command sets too (``also_set``) do not hold it."""
    from ..metadata.timestamps import format_timestamp
    from ..store.overview import CurrentDatasets, overview

    current = CurrentDatasets(ws)
    lines = []
    for reader in graph.readers(dataset_id):
        held = []
        for other in graph.inputs(reader):
            if other == dataset_id or other in also_set:
                continue
            at = overview(ws, other, current).watermark
            if at is None:
                held.append(f"{other} has no watermark yet")
            elif at < watermark:
                held.append(f"{other}'s is {format_timestamp(at)}")
        if held:
            lines.append(f"the watermark of {reader} will not follow it to {format_timestamp(watermark)}: "
                         f"{'; '.join(held)}")
    return lines


def _failed_input(ws: Workspace, graph: DatasetGraph, dataset_id: str,
                  not_pulled: dict[str, str]) -> str | None:
    """The failed dataset that an input of ``dataset_id`` was not pulled for, if any (one from
    a repository is updated from there, so its inputs do not matter)."""
    if pull_source(ws, dataset_id) is not None:
        return None
    return next((not_pulled[i] for i in graph.inputs(dataset_id) if i in not_pulled), None)


def pull_remote(
    ws: Workspace, ref: DatasetRef, *, as_name: str | None = None, recursive: bool = False,
    report: Callable[[PullOutcome], None] = lambda outcome: None,
) -> list[PullOutcome]:
    """Pull ``ref`` (``REPO/DATASET``); with ``recursive``, then every input its chain has read
    (transitively) that this workspace lacks or also keeps from a repository: each from where
    it came, or else from ``ref``'s repository under its own id, the way ``push -r`` puts
    them there. Keeps going past an input that fails, like a local pull."""
    from ..metadata.did import DatasetId
    from ..repository.fetch_remote import pull_from_repository
    from ..store.overview import CurrentDatasets

    outcomes: list[PullOutcome] = []
    # (local name, where from, the did:odf a current-ODF reader reads it by)
    wanted: list[tuple[str, DatasetRef, str | None]] = [(as_name or ref.dataset_id, ref, None)]
    seen: set[str] = set()
    while wanted:
        dataset_id, source, expected = wanted.pop(0)
        if dataset_id in seen:
            continue
        seen.add(dataset_id)
        try:
            synced = pull_from_repository(ws, source, as_name=dataset_id)
            outcome = PullOutcome(dataset_id, synced.message, signers=synced.signers)
            if expected is not None and \
                    CurrentDatasets(ws).state(dataset_id).id != DatasetId.parse(expected):
                raise Invalid(f"{source} is not the dataset its reader reads ({expected}); pull "
                              "that one by name")
        except (CoordError, OSError) as e:
            outcome = PullOutcome(dataset_id, str(e), status=PullStatus.FAILED, error=e)
        report(outcome)
        outcomes.append(outcome)
        if not (recursive and outcome.status is PullStatus.PULLED):
            continue
        for input_id, did in _inputs_read(ws, dataset_id):
            origin = pull_source(ws, input_id)
            if origin is None and ws.dataset(input_id).exists():
                continue  # the workspace's own dataset: it is pulled locally, not replaced
            wanted.append((input_id, origin or ref.sibling(input_id), did))
    return outcomes


def _inputs_read(ws: Workspace, dataset_id: str) -> list[tuple[str, str | None]]:
    """The inputs of ``dataset_id`` by local name (a current-ODF input: the name its reader
    reads it by, where this workspace does not hold it) and, for a current-ODF reader, the
    did:odf it reads."""
    if ws.odf_of(dataset_id) is OdfVersion.V018:
        return [(i, None) for i in inputs_in_force(ws.dataset(dataset_id).state(), None, None)]
    from ..store.overview import CurrentDatasets

    current = CurrentDatasets(ws)
    transform = current.state(dataset_id).transform
    found: list[tuple[str, str | None]] = []
    for given in transform.inputs if transform else ():
        name = current.name_of(given.dataset_ref, given.alias)  # the did:odf itself when none
        found.append(((given.alias or name) if name.startswith("did:") else name, given.dataset_ref))
    return found
