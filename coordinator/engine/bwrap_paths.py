"""What our bubblewrap sandboxes hold of the machine: its programs and libraries, and the Python
runtime with the folders a sandboxed program's packages are imported from, all read-only.

Standard library only: ``coord sql`` builds its sandbox (query/sandboxed.py) from it without
importing the engine's modules; the engine's (sandbox.py) adds its own paths to the same.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# The system paths programs run from: programs, shared libraries and the JVM (under
# /usr/lib/jvm). /bin, /lib... are links into /usr on merged-/usr systems.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def system_binds() -> list[str]:
    """bwrap's options that mount ``SYSTEM_PATHS`` read-only (a link as the same link)."""
    args = []
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    return args


def python_paths(packages: Sequence[str]) -> list[Path]:
    """The interpreter's installation and every folder ``packages`` are imported from (a
    virtualenv, a pyenv under the home folder, user site-packages), but not the current folder
    or a checkout on PYTHONPATH; none inside another."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent]
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            paths.append(Path(spec.origin).resolve().parents[package.count(".") + 1])
    return [p for p in dict.fromkeys(paths) if not any(p != q and p.is_relative_to(q) for q in paths)]
