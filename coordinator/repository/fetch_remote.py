"""Pull a dataset from a repository (a remote): check everything, then make it visible at once.

(``coordinator/build/pull.py`` brings local datasets up to date and calls this for one that came
from a repository; ``cli/pull.py`` is the command.)

1. Read the remote head and walk the remote chain back to the first block known locally,
   checking every block hash, link and signature (``metadata.chain.walk``).
2. Compare: up to date, behind (pull), ahead (nothing to do) or diverged (refuse); refuse
   new blocks whose signer the workspace does not accept (``trust.admit_pull``: a key other
   than the one pinned for the dataset, or what ``trust.require`` refuses).
3. Download the new blocks' data and checkpoints into a staging folder (each no larger than
   listed, checkpoint names checked before they become paths) and check every data file's
   hash against its block's DataSlice before Parquet reads it and before anything is visible
   locally.
4. Under the dataset lock, install them through the one append path
   (``DatasetWriter.install_sealed``: data → checkpoint → block → signature per block, then
   the head); the blocks are installed byte for byte as fetched (they are already sealed and
   signed by their author), and the head moves only if it is still the one the pull started
   from.
"""
from __future__ import annotations

from pathlib import Path

from ..metadata.chain import ChainBlock, ChainError, walk
from ..metadata.ids import DatasetRef
from ..metadata.objects import DataSlice
from ..trust.authorship import admit_pull, record_pull
from ..trust.verify import ExpectedFiles, check_data_file, expected_files
from ..workspace import DatasetState, SealedBlock, Workspace, layout
from ..workspace.config import OdfVersion
from ..workspace.fsutil import remove
from ..workspace.progress import Progress
from .current import CurrentRemote, OtherVersion, pull_current
from .fileio import OutsideRepository, TooLarge, WrongKind
from .registry import open_remote, remember
from .remote import (
    Diverged,
    RemoteDataset,
    RemoteDatasetNotFound,
    RemotePullResult,
    RemotePullStatus,
    SyncError,
    checked_name,
)
from .transfer import Job, run_parallel


def pull_from_repository(
    ws: Workspace, ref: DatasetRef, as_name: str | None = None, *, progress: Progress | None = None,
    known: DatasetState | None = None,
) -> RemotePullResult:
    """Bring the local copy of ``ref`` (``REPO/[USER/]ID``) up to date; ``as_name`` names it
    locally; ``known``: the local copy as this command already read it. A repository folder in
    the reference's layout (``refs/head`` at its top) holds a current-ODF (0.39) dataset, pulled
    by ``current.pull_current``."""
    name = as_name or ref.dataset_id
    if ref.url is not None and ref.url.startswith("odf+"):  # a node's smart protocol
        from .smart import smart_pull  # websockets: only this pull imports it

        with smart_pull(ref.url) as smart:
            return pull_current(ws, ref, smart, name, progress=progress)
    remote = open_remote(ws, ref)
    current = CurrentRemote(remote)
    if current.read_head()[0] is not None:  # the reference's layout: refs/head at the top
        return pull_current(ws, ref, current, name, progress=progress)
    if ws.odf_of(name) is OdfVersion.V039:
        raise OtherVersion(f"{ref} is not a current-ODF (0.39) dataset and the local {name} is "
                           "one (nothing was pulled): pull it --as another name")
    ds = ws.dataset(name)
    with ds.writer(known) as writer:
        local = list(writer.state.chain) if writer.state is not None else []  # newest first
        remote_head, _ = remote.read_head()
        if remote_head is None:
            raise RemoteDatasetNotFound.at(ref)
        ahead = next((i for i, cb in enumerate(local) if cb.hash == remote_head), None)
        if ahead is not None:
            remember(ws, ds.id, "pull", ref)
            if ahead == 0:
                return RemotePullResult(ds.id, ref, RemotePullStatus.UP_TO_DATE, 0, "up to date")
            return RemotePullResult(ds.id, ref, RemotePullStatus.AHEAD, ahead,
                                    f"local has {_blocks(ahead)} the remote lacks (ahead)")
        new, message = _compare(ws, remote, ref, remote_head, local)
        signers = admit_pull(ws, ds.id, local, new)

        vocab = next((cb.block.vocab for cb in local if cb.block.vocab), None)
        source = next((cb.block.source for cb in local if cb.block.source), None)
        expected = expected_files(new, vocab, source)
        staging = ws.meta / layout.pull_staging(ds.id)
        remove(staging)  # what an interrupted pull of this dataset left
        try:
            _download(remote, expected, staging, progress)
            writer.install_sealed([_sealed(remote, cb, staging) for cb in new])
            record_pull(ws, ds.id, local, new)
        finally:
            remove(staging)
    remember(ws, ds.id, "pull", ref)
    return RemotePullResult(ds.id, ref, RemotePullStatus.PULLED, len(new), message, signers)


def _compare(
    ws: Workspace, remote: RemoteDataset, ref: DatasetRef, remote_head: bytes, local: list[ChainBlock]
) -> tuple[list[ChainBlock], str]:
    """The checked remote blocks the local copy lacks (oldest first) and the situation in words."""
    known = {cb.hash: i for i, cb in enumerate(local)}  # block → how many local blocks are newer
    fetched: list[ChainBlock] = []
    junction = None
    try:
        for cb in walk(remote, remote_head, trusted=ws.trusted_keys()):
            if cb.hash in known:
                junction = cb.hash
                break
            fetched.append(cb)
    except ChainError as e:
        where = remote.file(layout.block_file(e.block_hash))
        raise SyncError(f"{ref}: {e} ({where}; nothing was pulled)") from None
    n = len(fetched)
    if not local:
        return fetched[::-1], f"new dataset: pulling {_blocks(n)}"
    if junction is None:
        raise Diverged(f"diverged: local {local[0].hash.hex()[:12]} and {ref} share no block "
                        "(delete the local copy, or pull it --as another name)")
    if junction != local[0].hash:
        mine = known[junction]
        raise Diverged(f"diverged: since block {junction.hex()[:12]} local has {_blocks(mine)} and "
                        f"{ref} has {n} (reset or delete the local copy)")
    return fetched[::-1], f"local is {_blocks(n)} behind; pulling"


def _blocks(n: int) -> str:
    return f"{n} block{'s' * (n != 1)}"


def _download(
    remote: RemoteDataset, expected: list[ExpectedFiles], staging: Path, progress: Progress | None
) -> None:
    """Fetch and check data files and checkpoints; raise naming the oldest bad block and file."""
    try:
        listed = remote.files("data") | remote.files("checkpoint")
    except WrongKind as wrong:
        raise SyncError(f"{wrong} (nothing was pulled)") from None
    jobs = []
    for e in expected:
        h = e.block_hash.hex()
        if e.slice is not None:
            rel = layout.data_file(e.block_hash)
            if rel not in listed:
                raise SyncError(f"block {h}: {remote.file(rel)} is missing in the repository "
                                "(nothing was pulled)")
            jobs.append(Job(listed[rel], _fetch_data(remote, rel, listed[rel], staging / rel, e, e.slice)))
        folder = layout.checkpoint_dir(e.block_hash) + "/"
        files = [checked_name(rel) for rel in listed if rel.startswith(folder)]
        if e.checkpoint and not files:
            raise SyncError(f"block {h}: checkpoint folder {remote.file(folder)} is missing in the "
                            "repository (nothing was pulled)")
        jobs += [Job(listed[rel], _fetch(remote, rel, listed[rel], staging / rel, e)) for rel in files]
    run_parallel(jobs, f"pulling {remote.path}", progress)


def _fetch(remote: RemoteDataset, rel: str, size: int, local: Path, e: ExpectedFiles, *,
           digest: bool = False):
    """A job that downloads ``rel`` (no more than the ``size`` listed) and returns its digest."""
    def run(on_bytes) -> bytes | None:
        try:
            return remote.io.get_file(remote.file(rel), local, on_bytes, limit=size, digest=digest)
        except (TooLarge, OutsideRepository, WrongKind) as error:
            raise SyncError(f"block {e.block_hash.hex()}: {error} (nothing was pulled)") from None

    return run


def _fetch_data(remote: RemoteDataset, rel: str, size: int, local: Path, e: ExpectedFiles,
                expected: DataSlice):
    fetch = _fetch(remote, rel, size, local, e, digest=True)

    def run(on_bytes) -> None:
        reason = check_data_file(local, expected, e.vocab, digest=fetch(on_bytes))
        if reason:
            raise SyncError(f"block {e.block_hash.hex()}: {remote.file(rel)}: {reason} (nothing was pulled)")

    return run


def _sealed(remote: RemoteDataset, cb: ChainBlock, staging: Path) -> SealedBlock:
    """A checked remote block with its downloaded files, for the append path."""
    data = remote.read_block(cb.hash)  # the bytes the walk checked (the remote keeps what it read)
    if data is None:
        raise SyncError(f"block {cb.hash.hex()}: {remote.file(layout.block_file(cb.hash))} "
                        "vanished during the pull (nothing was pulled)")
    staged_data = staging / layout.data_file(cb.hash)
    staged_checkpoint = staging / layout.checkpoint_dir(cb.hash)
    return SealedBlock(cb, data, remote.read_signature(cb.hash),
                       staged_data if staged_data.exists() else None,
                       staged_checkpoint if staged_checkpoint.exists() else None)
