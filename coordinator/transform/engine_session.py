"""One running engine for a whole command: the process, its client and its run folder.

The run folder is leased by this process (workspace/runs.py) and the engine watches the
lease, so the engine ends with the command however the command ends; the engine carries the
workspace and run folder as labels, so a later command can find what a crash left.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ..engine.client import EngineClient
from ..engine.process import LABEL_RUN_ID, LABEL_WORKSPACE
from ..engine.runtime import running_engine
from ..engine.settings import EngineSettings
from ..metadata.objects import EngineIdentity
from ..workspace import Workspace
from ..workspace.fsutil import remove
from ..workspace.runs import LEASE_NAME, run_folder


@dataclass
class EngineSession:
    client: EngineClient
    identity: EngineIdentity
    run_dir: Path  # the only folder the engine can write: outputs and new checkpoints go here

    def scratch(self, name: str) -> Path:
        """A fresh folder for one transaction's output and checkpoint."""
        path = self.run_dir / name
        remove(path)
        path.mkdir(parents=True)
        return path


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
                settings: EngineSettings | None = None) -> Iterator[EngineSession]:
    """Start the engine (the configured one unless ``settings`` says otherwise); it may read
    ``datasets`` (no other dataset of the workspace) and write only its run folder."""
    with run_folder(ws.run_dir, "engine") as run_dir:
        labels = {LABEL_WORKSPACE: str(ws.root), LABEL_RUN_ID: run_dir.name}
        with running_engine(settings or engine_settings(ws), run_dir, dataset_folders(ws, datasets),
                            lease=run_dir / LEASE_NAME, labels=labels) as engine:
            with EngineClient(engine.socket_path) as client:
                yield EngineSession(client, engine.identity, run_dir)
