"""What a current-ODF (0.39) derivative's pulls do with rows that arrive behind a window's or a
join's watermark (its manifest's ``transform.lateRows``), kept beside its chain.

A 0.39 transform has no place for the policy (``schemas/ODF-039.md``), so ``coord add`` keeps
it in ``.coord/cache/<name>/late-rows.json`` (``{"lateRows": "correct"}``), as the workspace's
own setting for its next steps:

- ``correct`` (what ``coord add`` and ``coord add --replace`` write unless the manifest names
  another): a step whose engine dropped rows as late is computed again over its inputs' rows
  (``build.current_derivative``, RECOMPUTE), so they correct the results.
- ``drop``: commit without them and say how many; ``fail``: fail the pull, commit nothing.
- No file (a derivative added before corrections, or pulled from a repository): ``drop``, so
  an existing derivative's results change only when its manifest is added again.

The chain alone says how each committed step was computed (a recomputed step names no
checkpoint), so replays and ``verify`` never read this file, and pushing does not carry it.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..metadata.objects import LateRows
from ..workspace import layout as ws_layout
from ..workspace.fsutil import atomic_write
from ..workspace.workspace import Workspace

# what a new current-ODF derivative gets when its manifest names none
NEW_DERIVATIVE_DEFAULT = LateRows.CORRECT


def late_rows_policy(ws: Workspace, name: str) -> LateRows:
    """The policy kept for the derivative ``name``; ``drop`` when none is."""
    return kept_late_rows_policy(ws, name) or LateRows.DROP


def kept_late_rows_policy(ws: Workspace, name: str) -> LateRows | None:
    """The policy kept for the derivative ``name``; None when none is (or it does not decode)."""
    try:
        kept = json.loads(_file(ws, name).read_text())
        return next(p for p in LateRows if p.value[0] == kept["lateRows"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


def keep_late_rows_policy(ws: Workspace, name: str, policy: LateRows) -> bool:
    """Keep ``policy`` for ``name``; whether it differs from the one kept before."""
    path = _file(ws, name)
    if path.exists() and late_rows_policy(ws, name) is policy:
        return False
    atomic_write(path, json.dumps({"lateRows": policy.value[0]}).encode())
    return True


def _file(ws: Workspace, name: str) -> Path:
    return ws.meta / ws_layout.cache_dir(name, ws_layout.LATE_ROWS)
