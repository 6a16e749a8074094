"""Run file transfers in parallel and report the bytes they move."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..workspace.progress import NoProgress, Progress

T = TypeVar("T")

# Transfers wait on the network or the disk, not the CPU: more threads than cores pay off.
WORKERS = 8


@dataclass(frozen=True)
class Job(Generic[T]):
    size: int  # bytes it will report, for the progress total
    run: Callable[[Callable[[int], None]], T]  # given the progress callback


def run_parallel(
    jobs: Sequence[Job[T]], description: str, progress: Progress | None = None, workers: int = WORKERS
) -> list[T]:
    """Run every job; on the first failure cancel what has not started and raise it."""
    if not jobs:
        return []
    progress = progress or NoProgress()
    progress.start(sum(j.size for j in jobs), description)
    try:
        with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            futures = [pool.submit(j.run, progress.advance) for j in jobs]
            _, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for f in pending:
                f.cancel()
        # The earliest failed job in list order, so callers can order jobs oldest block first.
        for f in futures:
            if not f.cancelled() and (error := f.exception()) is not None:
                raise error
        return [f.result() for f in futures]
    finally:
        progress.finish()
