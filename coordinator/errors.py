"""The one base of every error ``coord`` reports to a user as such, and its categories.

A ``CoordError`` is a refusal or a failure the user can act on (bad input, a conflict, a
missing dataset, an engine's own message); its text is one line that says what to do. The CLI
prints it as ``coord: error: ...``. Any other exception is a bug of ours and is printed as an
internal error; an ``OSError`` is the machine's (disk full, permissions) and printed as is.

An error class inherits from at most one category, which says what kind of refusal it is
(``coord serve`` answers with the matching HTTP status, see ``serve/api.py``):

- ``NotFound``: what the request names does not exist (a dataset, a repository, a block, a column);
- ``Conflict``: the request is well formed but the state of things refuses it now (a dataset
  busy with another writer, a lost compare-and-swap race, diverged histories, a dataset that
  already exists, a change its data or readers do not allow);
- ``Invalid``: the request itself is wrong (a manifest, a config value, an argument, SQL);
- ``Unavailable``: something the request needs cannot be started or reached (an engine, a
  stopping service).

A plain ``CoordError`` is the rest: mostly the data or the chain is not what it must be (a
corrupt block, a source file that cannot be read).
"""
from __future__ import annotations


class CoordError(Exception):
    """Base of every domain error; the message is the one line the user sees."""


class NotFound(CoordError):
    """What the request names does not exist."""


class Conflict(CoordError):
    """The request is well formed, but the current state refuses it (retry, or change that state)."""


class Invalid(CoordError):
    """The request is wrong: a manifest, a config value, an argument, a query."""


class Unavailable(CoordError):
    """Something the request needs cannot be started or reached now."""


CATEGORIES: tuple[type[CoordError], ...] = (NotFound, Conflict, Invalid, Unavailable)


def category(error: CoordError) -> type[CoordError]:
    """The category of ``error``: one of ``CATEGORIES``, or ``CoordError`` itself for the rest."""
    return next((c for c in CATEGORIES if isinstance(error, c)), CoordError)
