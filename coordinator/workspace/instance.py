"""The workspace's instance id: a random id naming this ``.coord`` folder where it is now.

Engines are tagged with it (container labels, the warm engine's record) so that a command acts
only on the engines of its own workspace. A record copied along with the workspace
(``cp -a``, a restored backup) names the original's engines; the copy must not take them for
its own. So the id is kept in ``.coord/instance.json`` with the folder's resolved path, device
and inode, and is drawn anew whenever any of them differs: a copy or a move gets an id of its
own, and every record made under the old one is ignored.

Invariant: two ``Workspace`` objects of one folder get the same id (drawing a new one is done
under an exclusive ``flock`` on ``.coord``, read again once it is held).
"""
from __future__ import annotations

import fcntl
import json
import os
import uuid
from pathlib import Path

from . import layout
from .fsutil import atomic_write


def instance_id(meta: Path) -> str:
    """The id of the workspace whose ``.coord`` folder is ``meta`` (resolved), drawn if needed."""
    here = _where(meta)
    found = _recorded(meta, here)
    if found is not None:
        return found
    fd = os.open(meta, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # one draw however many commands start at once
        found = _recorded(meta, here)
        if found is None:
            found = uuid.uuid4().hex
            atomic_write(meta / layout.INSTANCE, json.dumps({"id": found, **here}).encode())
        return found
    finally:
        os.close(fd)


def _where(meta: Path) -> dict:
    st = os.stat(meta)
    return {"path": str(meta.resolve()), "dev": st.st_dev, "ino": st.st_ino}


def _recorded(meta: Path, here: dict) -> str | None:
    try:
        doc = json.loads((meta / layout.INSTANCE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or {k: doc.get(k) for k in here} != here:
        return None  # a copy's or a moved workspace's record: not this folder's
    found = doc.get("id")
    return found if isinstance(found, str) and found.isalnum() else None
