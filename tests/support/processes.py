"""The processes a process started, read from /proc: for tests and benches that check what a
command leaves running or measure its whole tree."""
from __future__ import annotations

import os


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (those still its descendants: a process whose
    parent ended belongs to another now)."""
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as children:
                    kids = [int(c) for c in children.read().split()]
                found += kids
                stack += kids
        except FileNotFoundError:
            continue
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
