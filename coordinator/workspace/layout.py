"""The spec's per-dataset sharing layout, as paths relative to the dataset's folder.

One definition for the local workspace and for repositories: push and pull copy these files
unchanged, so both sides must name them the same way.

    meta/refs/head               hex hash of the newest block
    meta/blocks/<hash>           the exact hashed FlatBuffers bytes
    meta/signatures/<hash>       Ed25519 signature of the hash
    data/<block hash>            the Parquet slice the block added
    checkpoint/<block hash>/     engine state after that block
"""
from __future__ import annotations

HEAD = "meta/refs/head"


def block_file(block_hash: bytes) -> str:
    return f"meta/blocks/{block_hash.hex()}"


def signature_file(block_hash: bytes) -> str:
    return f"meta/signatures/{block_hash.hex()}"


def data_file(block_hash: bytes) -> str:
    return f"data/{block_hash.hex()}"


def checkpoint_dir(block_hash: bytes) -> str:
    return f"checkpoint/{block_hash.hex()}"


def published_record(dataset_id: str) -> str:
    """Relative to ``.coord``: what ``coord publish`` wrote where (feed URL → update → blocks)."""
    return f"cache/{dataset_id}/published.json"
