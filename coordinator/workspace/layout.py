"""Every path under ``.coord``, in one place: the workspace's folders and each dataset's.

The per-dataset part is the spec's sharing layout, as paths relative to the dataset's folder.
One definition for the local workspace and for repositories: push and pull copy these files
unchanged, so both sides must name them the same way.

    meta/refs/head               hex hash of the newest block
    meta/blocks/<hash>           the exact hashed FlatBuffers bytes
    meta/signatures/<hash>       Ed25519 signature of the hash
    data/<block hash>            the Parquet slice the block added
    checkpoint/<block hash>/     engine state after that block

The workspace's part is relative to ``.coord`` (docs/architecture.md, Workspace)::

    config.yaml                  settings (config.py)
    instance.json                this folder's random id, with where it is (instance.py)
    keys/ed25519.pem             the signing key (folder 0700)
    keys/ed25519.pub             its public key and the SHA3-256 of the .pem it came from
    datasets/<id>/               the sharing layout above
    cache/<id>/                  per-dataset state that is not shared: ingest downloads,
                                 state/<block hash>.json (the fetch state a block committed),
                                 remotes.json, signers.json, snapshot-state/,
                                 verified-signatures (the signature checks passed),
                                 published.json (coord publish: feed URL → updates),
                                 checked-slices.json (the data files found good, by state),
                                 late-rows.json (a 0.39 derivative's lateRows policy)
    locks/<id>.lock              one writer per dataset
    run/<kind>-<id>/             a running command's scratch, leased (runs.py)
    run/pull/<id>/               a repository pull's staging (no lease: one writer per dataset)
"""
from __future__ import annotations

HEAD = "meta/refs/head"
# A current-ODF dataset's folder is the reference's layout instead (coordinator/store/layout.py);
# its head is where a 0.18 folder has none, which is how the two are told apart.
CURRENT_HEAD = "refs/head"
BLOCKS, SIGNATURES, REFS = "meta/blocks", "meta/signatures", "meta/refs"
DATA, CHECKPOINT = "data", "checkpoint"
# The folders of a dataset in which a writer puts files named by block hash (or temporaries).
BLOCK_FOLDERS = (DATA, CHECKPOINT, BLOCKS, SIGNATURES)


def block_file(block_hash: bytes) -> str:
    return f"{BLOCKS}/{block_hash.hex()}"


def signature_file(block_hash: bytes) -> str:
    return f"{SIGNATURES}/{block_hash.hex()}"


def data_file(block_hash: bytes) -> str:
    return f"{DATA}/{block_hash.hex()}"


def checkpoint_dir(block_hash: bytes) -> str:
    return f"{CHECKPOINT}/{block_hash.hex()}"


# --- the workspace, relative to .coord -----------------------------------------------------------

CONFIG = "config.yaml"
INSTANCE = "instance.json"
KEYS = "keys"
SIGNING_KEY = f"{KEYS}/ed25519.pem"
PUBLIC_KEY = f"{KEYS}/ed25519.pub"  # its public key, remembered (Workspace.public_key)
DATASETS, CACHE, LOCKS, RUN = "datasets", "cache", "locks", "run"
WORKSPACE_FOLDERS = (DATASETS, CACHE, LOCKS, RUN, KEYS)


def dataset_dir(dataset_id: str) -> str:
    return f"{DATASETS}/{dataset_id}"


# the files and folders of a dataset's cache folder
STATE, REMOTES, SIGNERS, SNAPSHOT_STATE = "state", "remotes.json", "signers.json", "snapshot-state"
VERIFIED = "verified-signatures"  # the signatures found valid (workspace.dataset.CheckedBlocks)
PUBLISHED = "published.json"  # what ``coord publish`` wrote where (feed URL → update → blocks)
CHECKED_SLICES = "checked-slices.json"  # data files found good, by file state (trust.slice_check)
TAKEN_FILES = "taken-files.json"  # files a filesGlob source took, by size and mtime (ingest.taken_files)
# a 0.39 derivative's field lineage, one file per block that starts a version (store.field_lineage)
FIELD_LINEAGE = "field-lineage"
# the rows a 0.39 derivative's engine holds back after its newest step (build.pending_rows)
PENDING_ROWS = "pending-rows.json"
# what a 0.39 derivative's pulls do with late rows, its manifest's lateRows (store.late_rows)
LATE_ROWS = "late-rows.json"


def cache_dir(dataset_id: str, *inside: str) -> str:
    """The dataset's cache folder, or a path inside it (``cache_dir(id, SIGNERS)``)."""
    return "/".join((CACHE, dataset_id, *inside))


def state_file(dataset_id: str, block_hash: bytes) -> str:
    """The fetch state a block committed."""
    return cache_dir(dataset_id, STATE, f"{block_hash.hex()}.json")


def lock_file(dataset_id: str) -> str:
    return f"{LOCKS}/{dataset_id}.lock"


def pull_staging(dataset_id: str) -> str:
    return f"{RUN}/pull/{dataset_id}"
