"""Repositories (a local folder, an S3 bucket, or a web server, read-only) and sharing datasets
through them; File Feeds (``feed``: the convention; ``publish``: a dataset's blocks written as
feed updates).

The names below are imported from their modules on first use (PEP 562): pushing and pulling
need Arrow's file systems and JSON Schema, while a local ``coord pull`` only asks
``registry.pull_source`` where a dataset came from.
"""
from __future__ import annotations

import importlib
from typing import Any

_MODULE_OF = {
    "FileIO": "fileio", "RefConflict": "fileio", "RepositoryURLError": "fileio", "open_url": "fileio",
    "parse_url": "fileio", "RemotePullResult": "remote", "RemotePullStatus": "remote",
    "pull_from_repository": "fetch_remote",
    "PushOutcome": "push", "PushResult": "push", "PushStatus": "push", "push_dataset": "push",
    "push_datasets": "push", "Repository": "registry",
    "RepositoryError": "registry", "add_repository": "registry", "delete_repository": "registry",
    "get_repository": "registry", "list_repositories": "registry", "pull_source": "registry",
    "RemoteDataset": "remote", "SyncError": "remote",
}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
