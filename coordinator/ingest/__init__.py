"""Root-dataset ingest, in-process with Arrow (docs/architecture.md, Ingest).

One module per step: ``fetch`` (``fetch_feed`` for a File Feed; both hand on ``fetched``
files) → ``prepare`` → ``read`` (with ``schema_ddl``, ``convert`` and ``time_patterns``) →
preprocess (a callable from the engine) → ``merge`` → ``slice_layout``; ``history`` is what
the dataset already holds and ``pipeline.pull_root`` runs a pull end to end.
"""
from ..workspace.progress import NoProgress, Progress
from .errors import IngestError

__all__ = ["IngestError", "NoProgress", "Progress", "IngestResult", "pull_root"]


def __getattr__(name: str):
    # The pull needs Arrow; imported on first use, so ``fetch.probe`` (coord status) stays light.
    if name in ("IngestResult", "pull_root"):
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__} has no attribute {name}")
