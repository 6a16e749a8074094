"""Named repositories (``coord repo add/list/delete``) and each dataset's remembered remotes.

Repositories live in the workspace config (``repositories: {name: url}``). Where a dataset was
last pushed to and pulled from is per-dataset state, kept beside its other state in
``.coord/cache/<id>/remotes.json`` (``Dataset.remotes_path``; so deleting the dataset forgets
them too) rather than in the shared config, which concurrent pushes of different datasets
would race on.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Conflict, CoordError, Invalid, NotFound
from ..metadata.ids import DatasetRef, InvalidDatasetRef, is_dataset_id
from ..workspace import Workspace
from ..workspace.fsutil import atomic_write

if TYPE_CHECKING:
    from .fileio import FileIO
    from .remote import RemoteDataset

# The storage back ends (Arrow's file systems) and the remote chain reader (JSON Schema) are
# imported by the functions that open a repository: ``coord pull`` of a local dataset asks
# this module where the dataset came from and needs neither.


class RepositoryError(CoordError):
    pass


class UnknownRepository(RepositoryError, NotFound):
    pass


class RepositoryExists(RepositoryError, Conflict):
    pass


class BadRepositoryArgument(RepositoryError, Invalid):
    """A repository name or push target that is not one, or none where one is needed."""


@dataclass(frozen=True)
class Repository:
    name: str
    url: str

    def open(self) -> FileIO:
        from .fileio import parse_url

        return parse_url(self.url).open()


def add_repository(ws: Workspace, name: str, url: str) -> Repository:
    if not is_dataset_id(name):
        raise BadRepositoryArgument(f"not a valid repository name: {name!r} "
                                    "(letters, digits, inner '-' and '.')")
    from .fileio import parse_url

    parse_url(url)
    config = ws.config()
    if name in config.repositories:
        raise RepositoryExists(f"repository {name} already exists ({config.repositories[name]})")
    ws.save_config(config.set("repositories", {**config.repositories, name: url}))
    return Repository(name, url)


def list_repositories(ws: Workspace) -> list[Repository]:
    return [Repository(n, u) for n, u in sorted(ws.config().repositories.items())]


def get_repository(ws: Workspace, name: str) -> Repository:
    repos = ws.config().repositories
    if name not in repos:
        known = ", ".join(sorted(repos)) or "none; add one with 'coord repo add NAME URL'"
        raise UnknownRepository(f"no repository named {name} (known: {known})")
    return Repository(name, repos[name])


def delete_repository(ws: Workspace, name: str) -> None:
    config = ws.config()
    if name not in config.repositories:
        raise UnknownRepository(f"no repository named {name}")
    ws.save_config(config.set("repositories", {n: u for n, u in config.repositories.items() if n != name}))


# --- remembered remotes ------------------------------------------------------------------------


def parse_target(text: str, default_name: str) -> DatasetRef:
    """``REPO`` or ``REPO/NAME`` (push targets): the dataset keeps its id unless NAME is given."""
    repo, _, name = text.partition("/")
    try:
        return DatasetRef.parse(f"{repo}/{name or default_name}")
    except InvalidDatasetRef as e:
        raise BadRepositoryArgument(f"not a push target: {text!r} ({e})") from None


def remote_path(ref: DatasetRef) -> str:
    """The dataset's folder inside its repository (``[user/]id``)."""
    return f"{ref.username}/{ref.dataset_id}" if ref.username else ref.dataset_id


def remembered(ws: Workspace, dataset_id: str, direction: str) -> DatasetRef | None:
    """Where the dataset was last pushed (``direction="push"``) or pulled from (``"pull"``)."""
    text = ws.dataset(dataset_id).remote(direction)
    return DatasetRef.parse(text) if text else None


def pull_source(ws: Workspace, dataset_id: str) -> DatasetRef | None:
    """Where ``dataset_id`` was pulled from, so ``coord pull DS`` can pull from there again."""
    return remembered(ws, dataset_id, "pull")


def remember(ws: Workspace, dataset_id: str, direction: str, ref: DatasetRef) -> None:
    ws.cache_dir(dataset_id)
    path = ws.dataset(dataset_id).remotes_path
    remotes = json.loads(path.read_text()) if path.exists() else {}
    remotes[direction] = str(ref)
    atomic_write(path, json.dumps(remotes, sort_keys=True).encode())


def open_remote(ws: Workspace, ref: DatasetRef) -> RemoteDataset:
    """The dataset ``ref`` names inside its repository (``ref.is_remote`` must hold); one named
    by URL is the folder of that name in the repository at the URL's parent."""
    from .remote import RemoteDataset

    if ref.url is not None:
        from .fileio import parse_url

        return RemoteDataset(parse_url(ref.url.rpartition("/")[0]).open(), ref.dataset_id)
    assert ref.repository is not None
    return RemoteDataset(get_repository(ws, ref.repository).open(), remote_path(ref))
