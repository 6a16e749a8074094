"""Current-ODF (0.39) datasets in a repository: the reference's folder layout, read through the
same ``FileIO`` (folder, S3 or HTTP) as ODF 0.18 ones.

A dataset's folder in a repository, ``<repo>/<name>/``, is exactly a dataset folder of
``store/layout.py`` (``blocks/``, ``refs/head``, ``data/``, ``checkpoints/``, ``info/alias``,
and our ``signatures/``), as the reference's ``kamu push`` to a folder or a bucket writes it; the
folder is named by the dataset's alias. A folder with ``refs/head`` at its top holds a
current-ODF dataset, one with ``meta/refs/head`` an ODF 0.18 one; neither version is ever
written into a folder holding the other.

Invariants (pull):

- Every object is bounded before it is read: ``refs/head`` by ``MAX_REF``, a block by
  ``MAX_BLOCK``, a signature by ``MAX_SIGNATURE``, a data file or checkpoint by the ``size`` its
  block (already checked) records.
- A block's bytes are hashed against the name they are stored under before they are decoded
  (``codec.check_stored``); a data file's or checkpoint's SHA3-256 is computed while it streams
  and compared with the block's physical hash before anything parses it.
- The whole new chain is checked (hashes, links, signatures, the chain rules against the local
  state, authorship) before a byte of data is downloaded, and every object before a block is
  installed; the blocks then go through the one append path (``DatasetWriter.append_sealed``)
  oldest first, each moving ``refs/head`` last, so a pull cut short leaves a valid prefix that
  the next pull carries on from.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import Conflict
from ..metadata.flatbuffers_codec import BlockFormatError
from ..metadata.ids import DatasetRef
from ..metadata.multiformats import SHA3_256, Multihash
from ..metadata.odf39 import codec
from ..metadata.odf39.events import Checkpoint, DataSlice, MetadataBlock, Seed
from ..metadata.signing import Signature, SignatureStatus, check_signature
from ..store import layout
from ..store.dataset import CurrentDataset
from ..store.read import ChainBroken, DatasetState, StoredBlock, build, objects_of
from ..trust.authorship import admit_pull, record_pull
from ..workspace import Workspace
from ..workspace import layout as ws_layout
from ..workspace.config import OdfVersion
from ..workspace.fsutil import atomic_write, remove
from ..workspace.progress import Progress
from .fileio import OutsideRepository, TooLarge, WrongKind
from .registry import remember
from .remote import (
    MAX_BLOCK,
    MAX_SIGNATURE,
    Diverged,
    RemoteDataset,
    RemoteDatasetNotFound,
    RemotePullResult,
    RemotePullStatus,
    SyncError,
    read_ref,
)
from .transfer import Job, run_parallel

# The reference writes the head's multibase text with no newline; one is tolerated.
_HEAD = re.compile(rb"f1620[0-9a-f]{64}\n?")


class OtherVersion(SyncError, Conflict):
    """The repository's folder holds a dataset of the other ODF version than the local one."""


ObjectRef = DataSlice | Checkpoint  # an object a block names


class CurrentRemote:
    """A current-ODF dataset's folder in a repository (``remote.path``); what a pull reads
    (``smart.SmartPull`` reads a node's dataset through the smart protocol instead)."""

    def __init__(self, remote: RemoteDataset):
        self.remote = remote
        self.io = remote.io

    def file(self, relative: str) -> str:
        return self.remote.file(relative)

    def holds_odf18(self) -> bool:
        """Whether the folder holds an ODF 0.18 dataset (``meta/refs/head``)."""
        return self.io.is_file(self.file(ws_layout.HEAD))

    def read_head(self) -> tuple[Multihash | None, object]:
        """The head block's name (None: no current-ODF dataset here) and the ref's CAS token."""
        data, token = read_ref(self.io, self.file(layout.HEAD), _HEAD,
                               "f1620 and 64 lowercase hex digits, as the reference writes it")
        return (Multihash.parse(data.rstrip(b"\n").decode()) if data is not None else None), token

    def swap_head(self, new: Multihash, expected: object) -> None:
        self.io.swap_ref(self.file(layout.HEAD), str(new).encode(), expected)  # no newline

    def remote_head(self, local_head: Multihash | None) -> Multihash | None:
        """The head block a pull brings the local copy (at ``local_head``) to."""
        return self.read_head()[0]

    def will_download(self, objects: list[ObjectRef]) -> None:
        """(A folder needs no notice: its objects are where the layout says.)"""

    def read(self, rel: str, limit: int, what: str) -> bytes | None:
        """An object's bytes (None: absent), read no further than ``limit``."""
        try:
            return self.io.read_bytes(self.file(rel), limit)
        except TooLarge:
            raise SyncError(f"{self.file(rel)}: {what} larger than {limit} bytes "
                            "(nothing was pulled)") from None
        except (WrongKind, OutsideRepository) as e:
            raise SyncError(f"{e} (nothing was pulled)") from None


@dataclass(frozen=True)
class RemoteBlock:
    """A block read from a repository, its bytes checked against its name and its signature
    (if any) against the block."""

    name: Multihash
    block: MetadataBlock
    stored: bytes  # installed byte for byte
    signature: bytes | None
    signer: bytes | None  # the public key of its valid signature

    @property
    def hash(self) -> bytes:  # what authorship names a block by
        return self.name.digest


@dataclass(frozen=True)
class _LocalBlock:
    hash: bytes
    signer: bytes | None


def pull_current(
    ws: Workspace, ref: DatasetRef, source: CurrentRemote, name: str, *,
    progress: Progress | None = None, remember_source: bool = True,
) -> RemotePullResult:
    """Bring the local current-ODF dataset ``name`` up to ``ref``'s (see the module doc);
    ``remember_source``: record ``ref`` as where ``name`` is pulled from (not for a push that a
    node receives, which it installs as a pull from the pushed blocks)."""
    if ws.odf_of(name) is OdfVersion.V018:
        raise OtherVersion(f"{ref} is a current-ODF (0.39) dataset and the local {name} is ODF "
                           f"0.18 (nothing was pulled): pull it --as another name")
    ds = CurrentDataset(ws, name)
    with ds.writer() as writer:
        state = writer.state
        local = list(state.blocks) if state is not None else []  # oldest first
        head = source.remote_head(state.head if state is not None else None)
        if head is None:
            raise RemoteDatasetNotFound.at(ref)
        position = {b.hash: i for i, b in enumerate(local)}
        if head in position:
            if remember_source:
                remember(ws, name, "pull", ref)
            ahead = len(local) - 1 - position[head]
            if ahead == 0:
                return RemotePullResult(name, ref, RemotePullStatus.UP_TO_DATE, 0, "up to date")
            return RemotePullResult(name, ref, RemotePullStatus.AHEAD, ahead,
                                    f"local has {_blocks(ahead)} the remote lacks (ahead)")
        new, junction = _walk(source, head, set(position), ws.trusted_keys())
        mine = len(local) - 1 - position[junction] if junction is not None else len(local)
        message = _compare(ref, name, state, new, junction, mine)
        try:  # the chain rules, against the local state, before any data is downloaded
            build([StoredBlock(b.name, b.block) for b in new], state, strict=True)
        except ChainBroken as e:
            raise SyncError(f"{ref}: {e} (nothing was pulled)") from None
        authored = [_LocalBlock(b.hash.digest, _signer_of(ds.root, b.hash)) for b in local]
        signers = admit_pull(ws, name, authored, new)

        staging = ws.meta / ws_layout.pull_staging(name)
        remove(staging)  # what an interrupted pull of this dataset left
        try:
            staged = _download(source, new, ds.root, staging, progress)
            if state is None:
                atomic_write(ds.root / layout.ALIAS, name.encode())
            for b in new:
                data, checkpoint = objects_of(b.block)
                writer.append_sealed(
                    codec.SealedBlock(b.block, b.stored), signature=b.signature,
                    data=staged.pop(data.physical_hash, None) if data else None,
                    checkpoint=staged.pop(checkpoint.physical_hash, None) if checkpoint else None)
            record_pull(ws, name, authored, new)
        finally:
            remove(staging)
    if remember_source:
        remember(ws, name, "pull", ref)
    return RemotePullResult(name, ref, RemotePullStatus.PULLED, len(new), message, signers)


def _walk(source: CurrentRemote, head: Multihash, known: set[Multihash],
          trusted: frozenset[bytes]) -> tuple[list[RemoteBlock], Multihash | None]:
    """The remote blocks from ``head`` back to the first known one (the junction, returned) or
    to the Seed, oldest first; each read bounded, hashed against its name, then decoded."""
    found: list[RemoteBlock] = []
    name: Multihash | None = head
    while name is not None and name not in known:
        rel = layout.block_file(name)
        stored = source.read(rel, MAX_BLOCK, "block")
        if stored is None:
            named_by = "refs/head names it" if not found else "the next block links it"
            raise SyncError(f"{source.file(rel)}: {named_by}, but it is missing in the repository "
                            "(nothing was pulled)")
        try:
            block = codec.check_stored(stored, name)
        except BlockFormatError as e:
            raise SyncError(f"{source.file(rel)}: {e} (nothing was pulled)") from None
        signature = source.read(layout.signature_file(name), MAX_SIGNATURE, "signature")
        status, signer = check_signature(name.to_bytes(), signature, set(trusted))
        if status is SignatureStatus.INVALID:
            raise SyncError(f"{source.file(layout.signature_file(name))}: the signature does not "
                            "match the block (nothing was pulled)")
        found.append(RemoteBlock(name, block, stored, signature, signer))
        name = block.prev_block_hash
    return found[::-1], name


def _compare(ref: DatasetRef, name: str, state: DatasetState | None, new: list[RemoteBlock],
             junction: Multihash | None, mine: int) -> str:
    """What the pull does in words; refuses a remote chain that does not continue the local one
    (``mine``: the local blocks after the junction)."""
    n = len(new)
    if state is None:
        return f"new dataset: pulling {_blocks(n)}"
    if junction is None:
        seed = new[0].block.event if new else None
        if isinstance(seed, Seed) and seed.dataset_id != state.id:
            raise Diverged(f"{ref} is another dataset ({seed.dataset_id}) than the local {name} "
                           f"({state.id}); nothing was pulled: pull it --as another name")
        raise Diverged(f"diverged: local {state.head} and {ref} share no block "
                       "(delete the local copy, or pull it --as another name)")
    if junction != state.head:
        raise Diverged(f"diverged: since block {junction} local has {_blocks(mine)} and {ref} "
                       f"has {n} (reset or delete the local copy)")
    return f"local is {_blocks(n)} behind; pulling"


def _blocks(n: int) -> str:
    return f"{n} block{'s' * (n != 1)}"


def _signer_of(root: Path, block_hash: Multihash) -> bytes | None:
    """The signer a local block's signature names (checked when it was pulled or written)."""
    try:
        return Signature.from_bytes((root / layout.signature_file(block_hash)).read_bytes()).public_key
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def _download(source: CurrentRemote, new: list[RemoteBlock], root: Path, staging: Path,
              progress: Progress | None) -> dict[Multihash, Path]:
    """Every object the new blocks name that the local folder lacks, fetched into ``staging``
    and checked; physical hash → staged file. Raises naming the oldest bad block and file."""
    staged: dict[Multihash, Path] = {}
    wanted: list[ObjectRef] = []
    jobs = []
    for b in new:
        for obj in objects_of(b.block):
            if obj is None or obj.physical_hash in staged:
                continue
            rel = object_file(obj)
            if (root / rel).is_file():  # content-addressed: already here (the writer checks it)
                continue
            staged[obj.physical_hash] = staging / rel
            wanted.append(obj)
            jobs.append(Job(obj.size, _fetch(source, b, obj, rel, staging / rel)))
    source.will_download(wanted)
    run_parallel(jobs, f"pulling {source.remote.path}", progress)
    return staged


def object_file(obj: ObjectRef) -> str:
    """Where a dataset folder keeps a data slice's file or a checkpoint."""
    if isinstance(obj, DataSlice):
        return layout.data_file(obj.physical_hash)
    return layout.checkpoint_file(obj.physical_hash)


def _fetch(source: CurrentRemote, b: RemoteBlock, obj: DataSlice | Checkpoint, rel: str, local: Path):
    """A job that downloads ``rel`` no further than the size the block records, hashing it."""
    def run(on_bytes) -> None:
        reason: str | None
        try:
            digest = source.io.get_file(source.file(rel), local, on_bytes, limit=obj.size, digest=True)
        except FileNotFoundError:
            reason = "missing in the repository"
        except TooLarge:
            reason = f"larger than the {obj.size} bytes the block records"
        except (OutsideRepository, WrongKind) as e:
            reason = str(e)
        else:
            size = local.stat().st_size
            actual = Multihash(SHA3_256, digest or b"")
            reason = (f"{size} bytes, the block records {obj.size}" if size != obj.size
                      else None if actual == obj.physical_hash
                      else f"its bytes hash to {actual}, not to its name (the file was changed)")
        if reason is not None:
            raise SyncError(f"block {b.block.sequence_number} ({b.name}): {source.file(rel)}: "
                            f"{reason} (nothing was pulled)")

    return run


# --- push ------------------------------------------------------------------------------------


def uploads(ds: CurrentDataset, blocks: list[StoredBlock]) -> list[tuple[str, list[tuple[Path, str]]]]:
    """(phase, [(local file, path in the remote dataset)]) in upload order for ``blocks``
    (oldest first): data files, checkpoints, then each block's signature and block.

    Each object is checked first (size, then SHA3-256 against its name): a repository never
    gets a file other than the one its block names. A compacted slice whose original is not
    kept is sent as its bytes rebuilt from its rows (``store.compaction``), checked the same."""
    from ..store.compaction import slice_files
    from ..store.verify import file_problem  # Arrow: only a push reads it

    data: list[tuple[Path, str]] = []
    checkpoints: list[tuple[Path, str]] = []
    meta: list[tuple[Path, str]] = []
    seen: set[Multihash] = set()
    slices = [s for b in blocks if (s := objects_of(b.block)[0]) is not None]
    hashes = [s.physical_hash for s in slices]
    local = dict(zip(hashes, slice_files(ds.root, hashes), strict=True))
    for b in blocks:
        for obj in objects_of(b.block):
            if obj is None or obj.physical_hash in seen:
                continue
            seen.add(obj.physical_hash)
            rel = object_file(obj)
            path = local.get(obj.physical_hash, ds.root / rel)
            problem = file_problem(path, obj.physical_hash, obj.size)
            if problem is not None:
                raise SyncError(f"{ds.id}: block {b.block.sequence_number} ({b.hash}): {rel}: "
                                f"{problem}; nothing was pushed (coord verify {ds.id})")
            (data if isinstance(obj, DataSlice) else checkpoints).append((path, rel))
        signature = layout.signature_file(b.hash)
        if (ds.root / signature).is_file():
            meta.append((ds.root / signature, signature))
        meta.append((ds.root / layout.block_file(b.hash), layout.block_file(b.hash)))
    return [("data", data), ("checkpoints", checkpoints), ("metadata", meta)]
