"""The one error type of ingest: a message a user can act on, no stack trace needed."""


class IngestError(Exception):
    """Ingest failed; nothing was committed. The message names the file, line, column."""
