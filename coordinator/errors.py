"""The one base of every error ``coord`` reports to a user as such.

A ``CoordError`` is a refusal or a failure the user can act on (bad input, a conflict, a
missing dataset, an engine's own message); its text is one line that says what to do. The CLI
prints it as ``coord: error: ...``. Any other exception is a bug of ours and is printed as an
internal error; an ``OSError`` is the machine's (disk full, permissions) and printed as is.
"""
from __future__ import annotations


class CoordError(Exception):
    """Base of every domain error; the message is the one line the user sees."""
