"""Root-dataset ingest, in-process with Arrow (docs/architecture.md, Ingest).

One module per step: ``fetch`` → ``prepare`` → ``read`` (with ``schema_ddl`` and ``convert``)
→ preprocess (a callable from the engine) → ``merge`` → ``slices``; ``history`` is what the
dataset already holds and ``service.pull_root`` runs a pull end to end.
"""
from ..progress import NoProgress, Progress
from .errors import IngestError
from .service import PullResult, pull_root

__all__ = ["IngestError", "NoProgress", "Progress", "PullResult", "pull_root"]
