"""The local workspace: datasets on disk, their read model, the append path, the writer lock,
the typed config and the typed source state an ingest stores with a block (``source_state``);
the dependency graph between its datasets (``graph``), adding, deleting and resetting them
(``catalog``), and the progress protocol work reports bytes through (``progress``)."""
from .commit import CommitError, DatasetWriter, SealedBlock
from .config import Config, ConfigError
from .dataset import Dataset, DatasetNotFound
from .lock import DatasetBusy
from .state import DatasetState
from .workspace import Workspace, WorkspaceError

__all__ = [
    "CommitError", "Config", "ConfigError", "Dataset", "DatasetBusy", "DatasetNotFound",
    "DatasetState", "DatasetWriter", "SealedBlock", "Workspace", "WorkspaceError",
]
