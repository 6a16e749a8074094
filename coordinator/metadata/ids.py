"""Dataset identity (spec: Dataset Identity).

``DatasetRef = (Repository "/")? (Username "/")? DatasetID``; ids and repository names are
hostnames: ``Subdomain ("." Subdomain)*`` with ``Subdomain = [a-zA-Z0-9]+ ("-" [a-zA-Z0-9]+)*``.
The spec sets no length; an id is at most ``MAX_ID_LENGTH`` characters, because ids become
file names (``datasets/<id>``, ``locks/<id>.lock``, ``run/ingest-<id>-<8 hex>``) and a file
name holds 255 bytes (schemas/Common.json says the same).
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

    @staticmethod
    def parse(text: str) -> DatasetRef:
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

    def __str__(self) -> str:
        return "/".join(p for p in (self.repository, self.username, self.dataset_id) if p)
