"""Changing a dataset's files behind the coordinator's back, as a bad disk or an intruder would."""
from __future__ import annotations

from pathlib import Path


def flip_a_byte(path: Path, at: int = 100) -> None:
    """Flip the lowest bit of the byte at ``at``, in place (same inode, new mtime)."""
    data = path.read_bytes()
    path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
