"""Dataset identity (spec: Dataset Identity).

``DatasetRef = (Repository "/")? (Username "/")? DatasetID``; ids and repository names are
hostnames: ``Subdomain ("." Subdomain)*`` with ``Subdomain = [a-zA-Z0-9]+ ("-" [a-zA-Z0-9]+)*``.
A remote dataset may also be named by its URL (``http://host/path/ds``, ``file:///path/ds``; the
spec's ``DatasetRefRemote`` URL form): its last path component is its id.
The spec sets no length; an id is at most ``MAX_ID_LENGTH`` characters, because ids become
file names (``datasets/<id>``, ``locks/<id>.lock``, ``run/ingest-<id>-<8 hex>``) and a file
name holds 255 bytes (metadata/schemas/Common.json says the same).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import Invalid

_SUBDOMAIN = r"[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*"
_HOSTNAME = re.compile(rf"^{_SUBDOMAIN}(?:\.{_SUBDOMAIN})*$")
_USERNAME = re.compile(rf"^{_SUBDOMAIN}$")
MAX_ID_LENGTH = 200  # the longest name made of an id adds 16 characters; room to spare


class InvalidDatasetRef(Invalid, ValueError):
    pass


def is_dataset_id(text: str) -> bool:
    return len(text) <= MAX_ID_LENGTH and bool(_HOSTNAME.match(text))


def validate_dataset_id(text: str) -> str:
    if len(text) > MAX_ID_LENGTH:
        raise InvalidDatasetRef(f"dataset id longer than {MAX_ID_LENGTH} characters "
                                f"({len(text):,}): {text[:40]}...")
    if not is_dataset_id(text):
        raise InvalidDatasetRef(
            f"not a valid dataset id: {text!r} (expected dot-separated names of letters, digits "
            "and inner hyphens, e.g. org.example.weather)"
        )
    return text


@dataclass(frozen=True)
class DatasetRef:
    dataset_id: str
    repository: str | None = None
    username: str | None = None
    url: str | None = None  # the dataset's folder, when named by URL (no repository then)

    @staticmethod
    def parse(text: str) -> DatasetRef:
        if "://" in text:
            url = text.rstrip("/")
            return DatasetRef(validate_dataset_id(url.rpartition("/")[2]), url=url)
        parts = text.split("/")
        if len(parts) > 3:
            raise InvalidDatasetRef(f"not a dataset reference: {text!r}")
        *prefix, dataset_id = parts
        validate_dataset_id(dataset_id)
        repo = prefix[0] if prefix else None
        user = prefix[1] if len(prefix) == 2 else None
        if repo is not None and not _HOSTNAME.match(repo):
            raise InvalidDatasetRef(f"not a valid repository name: {repo!r}")
        if user is not None and not _USERNAME.match(user):
            raise InvalidDatasetRef(f"not a valid user name: {user!r}")
        return DatasetRef(dataset_id, repo, user)

    @property
    def is_remote(self) -> bool:
        """Whether it names a dataset in a repository (by the repository's name or by URL)."""
        return self.repository is not None or self.url is not None

    def sibling(self, dataset_id: str) -> DatasetRef:
        """The dataset ``dataset_id`` beside this one in its repository."""
        if self.url is not None:
            return DatasetRef(dataset_id, url=f"{self.url.rpartition('/')[0]}/{dataset_id}")
        return DatasetRef(dataset_id, self.repository, self.username)

    def __str__(self) -> str:
        if self.url is not None:
            return self.url
        return "/".join(p for p in (self.repository, self.username, self.dataset_id) if p)
