"""Small helpers shared by the benchmarks: timing and a printed table."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table


def median_time(
    fn: Callable[[], object], repeat: int = 5, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median time of `repeat` calls of `fn`, in seconds (the machines are noisy).

    Wall time by default; ``clock=time.process_time`` gives CPU time of all threads, which
    is steadier when other work shares the machine.
    """
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def print_table(rows: Sequence[dict], title: str | None = None) -> None:
    """Print dicts as a table; the first row's keys are the columns."""
    table = Table(title=title)
    for key in rows[0]:
        table.add_column(str(key), justify="right" if _is_number(rows[0][key]) else "left")
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key in rows[0]))
    Console(width=max(100, Console().width)).print(table)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
