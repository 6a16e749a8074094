"""A tiny progress protocol the services report bytes through; the CLI draws it with rich.

It lives at the lowest layer its reporters share (ingest, repository, verify, publish, pull
all stand on the workspace), so none of them imports upward; it imports nothing itself."""
from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, total_bytes: int | None, description: str) -> None: ...
    def advance(self, n: int) -> None: ...
    def finish(self) -> None: ...


class PullProgress(Progress, Protocol):
    """A pull's progress: bytes, and the engine's lines while a transform runs."""

    def __call__(self, engine_progress: object) -> None: ...


class NoProgress:
    def start(self, total_bytes: int | None, description: str) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def finish(self) -> None:
        pass

    def __call__(self, engine_progress: object) -> None:
        pass
