"""Repositories (a local folder or an S3 bucket) and sharing datasets through them."""
from .fetch_remote import RemotePullResult, RemotePullStatus, pull_from_repository, pull_source
from .fileio import FileIO, RefConflict, RepositoryURLError, open_url, parse_url
from .push import PushResult, push_dataset
from .registry import (
    Repository,
    RepositoryError,
    add_repository,
    delete_repository,
    get_repository,
    list_repositories,
)
from .remote import RemoteDataset, SyncError

__all__ = [
    "FileIO", "PushResult", "RefConflict", "RemoteDataset", "RemotePullResult", "RemotePullStatus",
    "Repository",
    "RepositoryError", "RepositoryURLError", "SyncError", "add_repository", "delete_repository",
    "get_repository", "list_repositories", "open_url", "parse_url", "pull_from_repository",
    "pull_source", "push_dataset",
]
