"""One running engine for a whole command: the workspace's warm engine, or one of its own.

With ``engine.keepWarm`` (the default) the command uses the workspace's warm engine (warm.py),
which outlives it. Otherwise the engine runs in a run folder leased by this process
(workspace/runs.py) and watches the lease, so it ends with the command however the command
ends. Either way the engine carries the workspace and run folder as labels, so a later command
can find what a crash left.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..workspace import Workspace, layout
from ..workspace.config import EngineConfig, OdfVersion
from ..workspace.graph import DatasetGraph, inputs_in_force
from ..workspace.runs import LEASE_NAME, run_folder
from . import factory, warm
from .process import engine_labels
from .settings import EngineSettings

if TYPE_CHECKING:  # the port's types: imported when an engine is opened
    from .port import Engine


def engine_settings(ws: Workspace | None) -> EngineSettings:
    """The ``engine`` settings of the workspace config (the defaults without a workspace);
    $COORD_ENGINE_RUNTIME and $COORD_ENGINE_KEEP_WARM (seconds) win."""
    cfg = ws.config().engine if ws is not None else EngineConfig()
    keep_warm = os.environ.get("COORD_ENGINE_KEEP_WARM")
    settings = EngineSettings(
        runtime=os.environ.get("COORD_ENGINE_RUNTIME") or cfg.runtime,
        spark_master=cfg.spark_master,
        spark_conf=dict(cfg.spark_conf),
        allow_network=cfg.allow_network,
        keep_warm=float(keep_warm) if keep_warm else cfg.keep_warm_s,
    )
    return replace(settings, image=cfg.image) if cfg.image else settings


def engine_reads(ws: Workspace, computed: Iterable[str], *, graph: DatasetGraph | None = None,
                 every_query: bool = False, proposed: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """The datasets an engine may read for a command that computes, replays or validates the
    transforms of ``computed`` (datasets of the workspace): the derivatives among them and
    their inputs that the workspace holds, no other. A root among them adds nothing: the
    engine reads a root's files (a preprocess query's input, a file read in the engine) as
    copies in its run folder, never from the dataset's folder.

    The inputs are those of each one's current query; with ``every_query``, those of every
    query its chain has had (a replay of an older block reads that block's inputs);
    ``proposed`` adds the inputs of new definitions being validated (``coord add --replace``
    checks a changed query against its new inputs). ``graph``: the command's, if it has one."""
    graph = graph if graph is not None else DatasetGraph(ws)
    reads: set[str] = set()
    for d in computed:
        # a 0.39 chain's inputs are the graph's (those in force: this layer reads no 0.39 chain)
        every = every_query and ws.odf_of(d) is not OdfVersion.V039
        inputs = {*(inputs_in_force(graph.state(d), None, None) if every else graph.inputs(d)),
                  *(proposed or {}).get(d, ())}
        if inputs:  # a derivative (or one being defined as one)
            reads.add(d)
            reads.update(i for i in inputs if graph.exists(i))
    return sorted(reads)


def dataset_folders(ws: Workspace, datasets: Iterable[str]) -> list[Path]:
    """The folders an engine for ``datasets`` mounts read-only: theirs, no other."""
    return [ws.dataset(d).root for d in datasets]


@contextmanager
def open_engine(ws: Workspace, datasets: Iterable[str],
                settings: EngineSettings | None = None) -> Iterator[Engine]:
    """An engine (the configured one unless ``settings`` says otherwise) that may read
    ``datasets`` and write only its run folder: the workspace's warm engine when keep-warm is
    on (warm.py), else one started for this command that ends with it."""
    settings = settings or engine_settings(ws)
    folders = dataset_folders(ws, datasets)
    if settings.keep_warm and not factory.overridden():
        from .attach import attached_engine

        # It serves every later command of the workspace, so it may read every dataset (and
        # those added later); still not the keys, config, caches or any file outside .coord.
        held = warm.acquire(ws, settings, [ws.meta / layout.DATASETS])
        if held is not None:
            with held, attached_engine(held.endpoint, folders) as engine:
                yield engine
            return
        settings = replace(settings, keep_warm=0.0)  # the warm one is busy: one of our own
    with run_folder(ws.run_dir, "engine") as run_dir:
        with factory.open_engine(settings, run_dir, folders, lease=run_dir / LEASE_NAME,
                                 labels=engine_labels(ws, run_dir.name)) as engine:
            yield engine


class EngineOnDemand:
    """Starts the engine the first time a dataset needs it; one per command. The engine sees
    only the folders of the datasets ``readable()`` names (read-only): ``engine_reads`` of the
    ones it computes. It is asked when the engine starts: a command that needs no engine
    (verify of a broken chain) never reads them. An engine that could not start is not tried
    again by the same command: every later dataset gets the same error at once."""

    def __init__(self, ws: Workspace, stack: ExitStack, readable: Callable[[], Iterable[str]],
                 settings=None):
        self._ws, self._stack, self._settings, self._engine = ws, stack, settings, None
        self._readable = readable
        self._failed: Exception | None = None

    @property
    def identity(self):
        """The running engine's identity, or None when none was needed."""
        return self._engine.identity if self._engine is not None else None

    def get(self):
        if self._failed is not None:
            raise self._failed
        if self._engine is None:
            try:
                engine = open_engine(self._ws, self._readable(), self._settings)
                self._engine = self._stack.enter_context(engine)
            except Exception as e:
                self._failed = e
                raise
        return self._engine
