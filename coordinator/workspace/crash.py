"""Crash injection for tests: ``COORD_CRASH_AT=<point>`` SIGKILLs the process at that point.

Tests use it to prove the commit protocol: a real ``coord`` process dies at each step and
the next run must find the previous head intact and finish the work exactly once.
"""
from __future__ import annotations

import os
import signal

ENV = "COORD_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
