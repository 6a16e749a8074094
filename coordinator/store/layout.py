"""Every path of a current-ODF (0.39) dataset folder, as the reference lays it out.

The reference (kamu-cli v0.265.0, odf ``dataset/src/entities/dataset_layout.rs`` and the
local-filesystem repositories of ``storage-lfs``) keeps a dataset in one folder::

    blocks/<multihash>         a block's stored manifest bytes, named by their SHA3-256 multihash
    refs/head                  the head block's multihash as text, no trailing newline
    data/<multihash>           a data slice's Parquet file, named by its physical hash
    checkpoints/<multihash>    an engine checkpoint (one file), named by its physical hash
    info/alias                 the dataset's alias (``name`` or ``account/name``) as text

and one folder of ours, which the reference neither reads nor transfers::

    signatures/<multihash>     the signature document of the block of that name (algorithm,
                               signer's public key, Ed25519 signature over the block hash's
                               binary multihash, ``Multihash.to_bytes``; metadata/signing.py)

and, once ``coord compact`` ran, the compacted files (``store/compaction.py``), also ours::

    compacted/index.json       which slices each compacted file holds, at which rows
    compacted/<multihash>      a compacted file, named by the SHA3-256 multihash of its bytes
    compacted/rows/<multihash> a compacted slice's bytes rebuilt from its rows, named by the
                               physical hash its block records (a cache for per-slice readers)

Invariants:

- Every object name is the multibase base16 text of a multihash (``f1620<64 hex>``); a name
  is only ever made from a ``Multihash`` here, so no other text becomes a path.
- Data files and checkpoints are content-addressed like blocks: two blocks naming the same
  bytes name the same file (a checkpoint carried over is not written again).
- A file is written under a temporary name in its own folder and renamed into place
  (``workspace.fsutil``); a name starting with ``TMP_PREFIX`` is never an object.
"""
from __future__ import annotations

from ..metadata.multiformats import Multihash
from ..workspace.fsutil import TMP_PREFIX

BLOCKS, REFS, DATA, CHECKPOINTS, INFO = "blocks", "refs", "data", "checkpoints", "info"
SIGNATURES = "signatures"
COMPACTED = "compacted"
COMPACTION_INDEX = f"{COMPACTED}/index.json"
REBUILT = f"{COMPACTED}/rows"
HEAD = f"{REFS}/head"
ALIAS = f"{INFO}/alias"
# The folders whose files are named by a multihash, in the order a writer fills them.
OBJECT_FOLDERS = (DATA, CHECKPOINTS, BLOCKS)
FOLDERS = (BLOCKS, REFS, DATA, CHECKPOINTS, INFO)

__all__ = ["ALIAS", "BLOCKS", "CHECKPOINTS", "COMPACTED", "COMPACTION_INDEX", "DATA", "FOLDERS",
           "HEAD", "INFO", "OBJECT_FOLDERS", "REBUILT", "REFS", "SIGNATURES", "TMP_PREFIX",
           "block_file", "checkpoint_file", "compacted_file", "data_file", "rebuilt_file",
           "signature_file"]


def block_file(block_hash: Multihash) -> str:
    return f"{BLOCKS}/{block_hash}"


def signature_file(block_hash: Multihash) -> str:
    return f"{SIGNATURES}/{block_hash}"


def data_file(physical_hash: Multihash) -> str:
    return f"{DATA}/{physical_hash}"


def checkpoint_file(physical_hash: Multihash) -> str:
    return f"{CHECKPOINTS}/{physical_hash}"


def compacted_file(name: Multihash) -> str:
    return f"{COMPACTED}/{name}"


def rebuilt_file(physical_hash: Multihash) -> str:
    return f"{REBUILT}/{physical_hash}"
