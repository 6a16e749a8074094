"""The one error type of ingest: a message a user can act on, no stack trace needed."""

from ..errors import CoordError


class IngestError(CoordError):
    """Ingest failed; nothing was committed. The message names the file, line, column."""
