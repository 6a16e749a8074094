"""The local workspace: datasets on disk, their read model, the append path, the writer lock,
the typed config and the typed source state an ingest stores with a block (``source_state``);
the dependency graph between its datasets (``graph``), adding, deleting and resetting them
(``catalog``), and the progress protocol work reports bytes through (``progress``).

The append path (``commit``: block hashing, signing, the source state's writing) is imported
when first named, so the commands that only read (``coord list``, ``status``, ``log``) do not
load it."""
from typing import TYPE_CHECKING

from .config import Config, ConfigError
from .dataset import Dataset, DatasetNotFound
from .lock import DatasetBusy
from .state import DatasetState
from .workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from .commit import CommitError, DatasetWriter, SealedBlock

__all__ = [
    "CommitError", "Config", "ConfigError", "Dataset", "DatasetBusy", "DatasetNotFound",
    "DatasetState", "DatasetWriter", "SealedBlock", "Workspace", "WorkspaceError",
]


def __getattr__(name: str):
    if name in ("CommitError", "DatasetWriter", "SealedBlock"):
        from . import commit

        return getattr(commit, name)
    raise AttributeError(f"module {__name__} has no attribute {name}")
