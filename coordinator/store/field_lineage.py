"""The field lineage of a current-ODF (0.39) derivative, kept beside its chain.

A 0.39 block has no place for it (``schemas/ODF-039.md``), so it is this workspace's own, as a
root's fetch states are: ``.coord/cache/<name>/field-lineage/<block multihash>.json``, one file
per ``ExecuteTransform`` that starts a version (the engine's lineage differs from the newest
one recorded), in the form ``FieldLineage`` has in YAML manifests, each input named by its
workspace dataset.

Invariants:

- A version belongs to a block of the chain: files of blocks the chain no longer reaches (a
  reset) are not read. A lost file loses that version until a step records one again; a file
  that does not decode is left out, never guessed.
- It is written after its block, under the dataset's writer lock; it is a record, not a
  commitment: pushing the dataset does not carry it.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..metadata.multiformats import Multihash
from ..metadata.objects import FieldLineage
from ..metadata.yaml_codec import from_dict, to_dict
from ..workspace import layout as ws_layout
from ..workspace.fsutil import atomic_write
from .dataset import CurrentDataset
from .read import DatasetState, StoredBlock


def lineage_file(ds: CurrentDataset, block: Multihash) -> Path:
    return ds.ws.meta / ws_layout.cache_dir(ds.id, ws_layout.FIELD_LINEAGE, f"{block}.json")


def recorded_versions(ds: CurrentDataset, state: DatasetState) -> list[tuple[StoredBlock, FieldLineage]]:
    """The field lineage versions of the chain ``state``, oldest first, by the block starting each."""
    folder = ds.ws.meta / ws_layout.cache_dir(ds.id, ws_layout.FIELD_LINEAGE)
    names = {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()
    found = []
    for stored in state.blocks:
        if f"{stored.hash}.json" in names:
            try:
                found.append((stored, from_dict(FieldLineage, json.loads(
                    lineage_file(ds, stored.hash).read_text()))))
            except (ValueError, OSError):  # a DecodeError is a ValueError
                continue
    return found


def record_version(ds: CurrentDataset, state: DatasetState, block: Multihash, lineage: FieldLineage) -> None:
    """Keep ``lineage`` as starting at ``block`` unless it is the newest version of ``state``
    (the chain before ``block``) already."""
    versions = recorded_versions(ds, state)
    if versions and versions[-1][1] == lineage:
        return
    path = lineage_file(ds, block)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(to_dict(lineage), indent=1, sort_keys=True).encode())
