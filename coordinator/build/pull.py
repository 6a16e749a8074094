"""``coord pull``: bring datasets up to date, upstream first, with one engine for the command.

Each dataset is pulled by the service that fits it: one that came from a repository by the
repository sync, a root dataset by ingest, a derivative by the transform service. The engine
is started at most once, on first need, and stopped when the command ends.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime

from ..engine.session import EngineOnDemand
from ..errors import CoordError, Invalid
from ..workspace.graph import DatasetGraph
from ..metadata.objects import DatasetSourceRoot
from ..workspace.progress import PullProgress
from ..repository.registry import pull_source
from ..workspace import DatasetNotFound, Workspace


@dataclass
class PullOutcome:
    dataset_id: str
    message: str
    block_hash: bytes | None = None
    signers: list = field(default_factory=list)  # trust.authorship.Signer of blocks pulled from a repository


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
    from ..ingest.pipeline import pull_root

    graph = DatasetGraph(ws)
    order = pull_order(ws, graph, ids, recursive=recursive)
    outcomes = []
    with ExitStack() as stack:
        engine = EngineOnDemand(ws, stack, lambda: graph.with_inputs(order))
        for dataset_id in order:
            state = graph.state(dataset_id)  # read once, handed to the writer that pulls it
            progress = progress_factory(dataset_id) if progress_factory else None
            origin = pull_source(ws, dataset_id)
            if origin is not None:
                from ..repository.fetch_remote import pull_from_repository

                synced = pull_from_repository(ws, origin, as_name=dataset_id, progress=progress,
                                              known=state)
                outcome = PullOutcome(dataset_id, synced.message, signers=synced.signers)
            elif isinstance(state.source, DatasetSourceRoot):
                ingested = pull_root(
                    ws, dataset_id, progress=progress, state=state,
                    set_watermark=set_watermark if dataset_id in ids else None,
                    engine=engine.get,
                )
                outcome = PullOutcome(dataset_id, ingested.message, ingested.block_hash)
            else:
                if set_watermark is not None:
                    raise Invalid(f"{dataset_id} is a derivative: its watermark follows its inputs")
                from ..transform.execute import pull_derivative  # gRPC: only for derivatives

                derived = pull_derivative(ws, dataset_id, engine.get, progress=progress, state=state)
                outcome = PullOutcome(dataset_id, derived.message, derived.block_hash)
            report(outcome)
            outcomes.append(outcome)
    return outcomes
