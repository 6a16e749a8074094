"""The local workspace: datasets on disk, the commit protocol and the writer lock."""
from .commit import CommitError, DatasetWriter
from .dataset import Dataset, DatasetNotFound, DatasetSummary
from .lock import DatasetBusy
from .workspace import Workspace, WorkspaceError

__all__ = [
    "CommitError", "Dataset", "DatasetBusy", "DatasetNotFound", "DatasetSummary",
    "DatasetWriter", "Workspace", "WorkspaceError",
]
