"""The local workspace: datasets on disk, their read model, the append path, the writer lock
and the typed config."""
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
