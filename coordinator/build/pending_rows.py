"""The input rows a current-ODF (0.39) derivative's engine holds back after its newest step,
kept beside its chain so ``coord status``, ``coord list`` and the API say so without an engine.

A temporal join's events wait in the engine's checkpoint (``pending/``) until the temporal
tables' watermark reaches their event time. Only the engine can count them (its Execute result,
``PendingRows``), and a 0.39 block has no place for the count, so the pull that commits a step
keeps what the engine said, each input and table named by its workspace dataset, in
``.coord/cache/<name>/pending-rows.json`` (``{"block": multihash, "inputs": [...]}``), written
after its block under the dataset's writer lock.

It speaks for that block only: read for the newest ``ExecuteTransform`` of the chain, and not
read when it names another block (a newer step by a coord that kept none, a crash between the
block and the file, a reset). It is a record, not a commitment: pushing does not carry it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.timestamps import format_timestamp, parse_timestamp
from ..workspace import layout as ws_layout
from ..workspace.fsutil import atomic_write

if TYPE_CHECKING:
    from ..engine.port import PendingRows
    from ..metadata.multiformats import Multihash
    from ..workspace import Workspace


def pending_file(ws: Workspace, name: str) -> Path:
    return ws.meta / ws_layout.cache_dir(name, ws_layout.PENDING_ROWS)


def record_pending(ws: Workspace, name: str, block: Multihash, pending: list[PendingRows]) -> None:
    """Keep ``pending`` as what waits after ``block``, the step just committed (none: nothing)."""
    atomic_write(pending_file(ws, name), json.dumps({"block": str(block), "inputs": pending_json(pending)},
                                                    indent=1).encode())


def pending_json(pending: list[PendingRows]) -> list[dict]:
    """``pending`` as the file, ``coord status -o json`` and the API give it."""
    return [{"input": p.input, "rows": p.rows, "waitingFor": list(p.waiting_for),
             "watermark": format_timestamp(p.watermark) if p.watermark else None} for p in pending]


def recorded_pending(ws: Workspace, name: str, block: Multihash) -> list[PendingRows]:
    """What waits after step ``block`` as its pull recorded it; none when no file speaks for it
    (a file that does not decode is left out, never guessed)."""
    try:
        kept = json.loads(pending_file(ws, name).read_text())
        if kept.get("block") != str(block):
            return []
        # the engine port (some forty request and result types): only when rows wait
        from ..engine.port import PendingRows

        return [PendingRows(e["input"], int(e["rows"]), tuple(e["waitingFor"]),
                            parse_timestamp(e["watermark"]) if e["watermark"] else None)
                for e in kept["inputs"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def pending_words(p: PendingRows) -> str:
    """What waits and for what, in one sentence."""
    rows = f"{p.rows:,} rows" if p.rows != 1 else "1 row"
    tables = " and ".join(p.waiting_for)
    at = f"it is {format_timestamp(p.watermark)}" if p.watermark else "it has none yet"
    wait, their = ("wait", "their") if p.rows != 1 else ("waits", "its")
    return f"{rows} of {p.input} {wait} for {tables}' watermark to reach {their} event time ({at})"
