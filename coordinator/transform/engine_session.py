"""One running engine for a whole command, in a run folder of the workspace.

The run folder is leased by this process (workspace/runs.py) and the engine watches the
lease, so the engine ends with the command however the command ends; the engine carries the
workspace and run folder as labels, so a later command can find what a crash left.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ..engine import factory
from ..engine.port import Engine
from ..engine.process import LABEL_RUN_ID, LABEL_WORKSPACE
from ..engine.settings import EngineSettings
from ..workspace import Workspace
from ..workspace.runs import LEASE_NAME, run_folder


def engine_settings(ws: Workspace) -> EngineSettings:
    """The ``engine`` settings of the workspace config; $COORD_ENGINE_RUNTIME wins."""
    cfg = ws.config().engine
    settings = EngineSettings(
        runtime=os.environ.get("COORD_ENGINE_RUNTIME") or cfg.runtime,
        spark_master=cfg.spark_master,
        spark_conf=dict(cfg.spark_conf),
        allow_network=cfg.allow_network,
    )
    return replace(settings, image=cfg.image) if cfg.image else settings


def dataset_folders(ws: Workspace, datasets: Iterable[str]) -> list[Path]:
    """The folders an engine for ``datasets`` mounts read-only: theirs, no other."""
    return [ws.dataset(d).root for d in datasets]


@contextmanager
def open_engine(ws: Workspace, datasets: Iterable[str],
                settings: EngineSettings | None = None) -> Iterator[Engine]:
    """Start the engine (the configured one unless ``settings`` says otherwise); it may read
    ``datasets`` (no other dataset of the workspace) and write only its run folder."""
    with run_folder(ws.run_dir, "engine") as run_dir:
        labels = {LABEL_WORKSPACE: str(ws.root), LABEL_RUN_ID: run_dir.name}
        with factory.open_engine(settings or engine_settings(ws), run_dir, dataset_folders(ws, datasets),
                                 lease=run_dir / LEASE_NAME, labels=labels) as engine:
            yield engine
