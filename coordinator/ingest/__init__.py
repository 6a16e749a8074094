"""Root-dataset ingest, in-process with Arrow (docs/architecture.md, Ingest).

One module per step: ``fetch`` → ``prepare`` → ``read`` (with ``schema_ddl`` and ``convert``)
→ preprocess (a callable from the engine) → ``merge`` → ``slices``; ``history`` is what the
dataset already holds and ``service.pull_root`` runs a pull end to end.
"""
from ..progress import NoProgress, Progress
from .errors import IngestError

__all__ = ["IngestError", "NoProgress", "Progress", "IngestResult", "pull_root"]


def __getattr__(name: str):
    # The pull needs Arrow; imported on first use, so ``fetch.probe`` (coord status) stays light.
    if name in ("IngestResult", "pull_root"):
        from . import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__} has no attribute {name}")
