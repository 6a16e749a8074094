"""Push: upload what the repository lacks, then move its head by compare-and-swap.

Order (spec: Dataset Sharing): data files → checkpoints → signatures and blocks →
``refs/head`` (for a current-ODF dataset, ``info/alias`` just before it). Readers only follow
the head, so until the last step they see the old state whole; a push killed midway leaves
files nobody references, and the next push skips the ones that arrived complete. The head moves
only if it is still what this push read, so of two concurrent pushers exactly one wins and the
other is told to pull first.
"""
from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ..errors import CoordError
from ..metadata.chain import ChainBlock
from ..metadata.ids import DatasetRef
from ..metadata.multiformats import Multihash
from ..store import layout as layout39
from ..store.dataset import CurrentDataset
from ..store.overview import CurrentDatasets
from ..store.read import StoredBlock, objects_of, refused_by_reference
from ..trust.slice_check import checked_slices
from ..workspace import Dataset, DatasetNotFound, Workspace, layout
from ..workspace.config import OdfVersion
from ..workspace.crash import crash_point
from ..workspace.graph import DatasetGraph
from ..workspace.progress import Progress
from ..workspace.runs import run_folder
from . import smart
from .current import CurrentRemote, OtherVersion
from .current import uploads as current_uploads
from .fileio import HttpFileIO, RefConflict, token_headers
from .registry import BadRepositoryArgument, open_remote, parse_target, remember, remembered, remote_path
from .remote import MAX_REF, Diverged, RemoteDataset, SyncError
from .transfer import Job, run_parallel


@dataclass(frozen=True)
class PushResult:
    dataset_id: str
    target: DatasetRef
    blocks: int  # blocks the remote did not have
    files: int  # files uploaded (those already there are skipped)
    bytes: int
    message: str


@dataclass(frozen=True)
class _Plan:
    """What a push of one dataset sends: the blocks the remote lacks, the files in upload
    order, and the compare-and-swap that moves the remote head (None: it stays)."""

    blocks: int
    phases: list[tuple[str, list[tuple[Path, str]]]]
    move_head: Callable[[], None] | None


def push_dataset(
    ws: Workspace, dataset_id: str, to: str | None = None, *, progress: Progress | None = None,
    repair: bool = False,
) -> PushResult:
    """Push ``dataset_id`` to ``to`` (``REPO`` or ``REPO/NAME``), or where it was pushed last.
    With ``repair``, also every object of the blocks the repository already has whose bytes
    there differ from the local file (damaged or replaced), after checking the local ones.

    An ODF 0.18 dataset goes to its folder in 0.18's layout, a current-ODF (0.39) one in the
    reference's (``current``); a folder holding the other version is refused."""
    odf = ws.odf_of(dataset_id)
    if odf is None:
        raise DatasetNotFound(dataset_id)
    target = parse_target(to, dataset_id) if to else remembered(ws, dataset_id, "push")
    if target is None:
        raise BadRepositoryArgument(f"{dataset_id} has not been pushed before: "
                                    "say where with --to REPO[/NAME]")
    if target.url is not None and target.url.startswith("odf+"):  # a node's smart protocol
        if odf is not OdfVersion.V039:
            raise BadRepositoryArgument(f"{target}: the smart transfer protocol moves current-ODF "
                                        f"(0.39) datasets and {dataset_id} is ODF 0.18")
        if repair:
            raise BadRepositoryArgument(f"{target}: --repair reads a folder or S3 repository back; "
                                        "a node checks what it receives itself")
        return _smart_push(ws, dataset_id, target, progress)
    remote = open_remote(ws, target)
    if remote.io.read_only:
        raise BadRepositoryArgument(f"{target}: {remote.io.root} is read-only (an HTTP repository); "
                                    "push to a folder or S3 repository, which a web server may serve")
    if odf is OdfVersion.V039:
        plan = _current_plan(ws, dataset_id, target, remote, repair)
    else:
        plan = _odf18_plan(ws, dataset_id, target, remote, repair)
    if plan is None:
        remember(ws, dataset_id, "push", target)
        return PushResult(dataset_id, target, 0, 0, 0, f"{target} is up to date")

    have = remote.files("")
    files = total = 0
    repaired: set[str] = set()
    for description, uploads in plan.phases:
        if repair:
            repaired |= _damaged(ws, remote, uploads, have, progress)
        todo = [(local_path, rel) for local_path, rel in uploads
                if have.get(rel) != local_path.stat().st_size or rel in repaired]
        run_parallel([_upload_job(remote, p, rel) for p, rel in todo], f"push {description}", progress)
        files += len(todo)
        total += sum(p.stat().st_size for p, _ in todo)
        crash_point(f"push-{description}-uploaded")
    if plan.move_head is not None:
        try:
            plan.move_head()
        except RefConflict:
            raise Diverged(
                f"remote changed, pull first ({target} moved while {dataset_id} was pushed)"
            ) from None
    remember(ws, dataset_id, "push", target)
    n = plan.blocks
    pushed = f"pushed {n} block{'s' * (n != 1)} to {target}" if n else ""
    mended = (f"repaired {len(repaired)} damaged file{'s' * (len(repaired) != 1)} of {target}"
              if repaired else f"every file {target} holds is intact" if repair else "")
    return PushResult(dataset_id, target, n, files, total, "; ".join(filter(None, [pushed, mended])))


def _smart_push(ws: Workspace, dataset_id: str, target: DatasetRef, progress: Progress | None) -> PushResult:
    """Push through a node's ``/{dataset}/push`` (``smart``): the blocks the node lacks in one
    batch, the objects it asks for by ``PUT``; the node checks everything and moves its head
    only if it is still the one this push read."""
    assert target.url is not None
    base, _, name = smart.http_url(target.url).rpartition("/")
    node = CurrentRemote(RemoteDataset(HttpFileIO(base), name))
    remote_head = node.read_head()[0]  # the simple protocol's refs/head (a 404: no dataset yet)
    ds = CurrentDataset(ws, dataset_id)
    _, new = _new_blocks(ds, target, remote_head)
    if not new:
        remember(ws, dataset_id, "push", target)
        return PushResult(dataset_id, target, 0, 0, 0, f"{target} is up to date")
    local = {rel: path for _, files in current_uploads(ds, new) for path, rel in files}  # checked
    objects = list({o.physical_hash: o for b in new for o in objects_of(b.block) if o is not None}.values())
    where, session = target.url, smart.Session(target.url, "push")
    try:
        plan = smart.transfer_plan(
            len(new), sum(local[layout39.block_file(b.hash)].stat().st_size for b in new), objects)
        tag, content = smart.result(session.ask(
            {"current_head": str(remote_head) if remote_head else None, "transfer_plan": plan,
             "force_update_if_diverged": False, "visibility_for_created_dataset": "Private"},
            "push request"), where, "push request")
        if tag == "Err":
            raise Diverged(f"remote changed, pull first ({target} moved while {dataset_id} was "
                           f"pushed: {str(content)[:200]})")
        batch = smart.pack_blocks([(b.hash, local[layout39.block_file(b.hash)].read_bytes()) for b in new])
        smart.result(session.ask({"new_blocks": batch}, "metadata request"), where, "metadata request")
        _, accepted = smart.result(session.ask(
            {"object_files": [smart.object_ref(o) for o in objects], "is_truncated": False},
            "objects request"), where, "objects request")
        jobs = []
        for strategy in smart.field(accepted, "object_transfer_strategies", where, "objects request"):
            if strategy.get("push_strategy") == "SkipUpload":
                continue
            try:
                rel, _ = smart.object_rel(strategy["object_file"])
                to = strategy["upload_to"]
                url, headers = str(to["url"]), {h["name"]: h["value"] for h in to.get("headers") or []}
                path = local[rel]
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise smart.SmartProtocolError(f"{where}: a transfer strategy is malformed ({e})") from None
            jobs.append(Job(path.stat().st_size, _smart_upload(url, headers, path)))
        run_parallel(jobs, "push objects", progress)
        _smart_signatures(target.url, ds, new)
        smart.drain(session)
        session.send({"details": "Complete"}, "upload progress")
        confirmed = session.ask({}, "complete request")  # DatasetPushComplete
        if confirmed != {}:
            smart.result(confirmed, where, "complete request")
            raise smart.SmartProtocolError(f"{where}: the complete request got no confirmation")
    finally:
        session.close()
    remember(ws, dataset_id, "push", target)
    n, sent = len(new), sum(j.size for j in jobs)
    return PushResult(dataset_id, target, n, len(jobs), sent, f"pushed {n} block{'s' * (n != 1)} to {target}")


def _smart_signatures(url: str, ds: CurrentDataset, new: list[StoredBlock]) -> None:
    """Our extension: each new block's signature, ``PUT`` beside the objects; a node that has no
    such route (a kamu node: 404 or 405) gets the blocks unsigned."""
    for b in new:
        rel = layout39.signature_file(b.hash)
        if (ds.root / rel).is_file():
            try:
                smart.put_object(f"{smart.http_url(url)}/{rel}", token_headers(), ds.root / rel,
                                 lambda _: None)
            except smart.NotAccepted:
                return


def _smart_upload(url: str, headers: dict[str, str], path: Path) -> Callable[[Callable[[int], None]], None]:
    def run(on_bytes: Callable[[int], None]) -> None:
        smart.put_object(url, headers, path, on_bytes)

    return run


def _diverged(target: DatasetRef, dataset_id: str, head: str) -> Diverged:
    return Diverged(f"{target} has blocks you don't (its head {head} is not in the local chain "
                    f"of {dataset_id}): pull first")


def _odf18_plan(ws: Workspace, dataset_id: str, target: DatasetRef, remote: RemoteDataset,
                repair: bool) -> _Plan | None:
    ds = ws.dataset(dataset_id)
    current = CurrentRemote(remote)
    if current.read_head()[0] is not None:
        raise OtherVersion(f"{target} holds a current-ODF (0.39) dataset and {dataset_id} is ODF "
                           "0.18 (nothing was pushed): push it to another NAME")
    remote_head, token = remote.read_head()
    local = list(ds.chain())  # newest first, every block checked
    hashes = [cb.hash for cb in local]
    if remote_head is not None and remote_head not in hashes:
        raise _diverged(target, dataset_id, remote_head.hex()[:12])
    new = list(reversed(local[: hashes.index(remote_head)] if remote_head else local))
    if not new and not repair:
        return None
    return _Plan(len(new), _uploads(ds, list(reversed(local)) if repair else new),
                 (lambda: remote.swap_head(new[-1].hash, token)) if new else None)


class RefusedByReference(SyncError):
    """A current-ODF chain holding a block the reference's pull refuses (one coord wrote before
    it followed that rule): nothing that pulls could take it, so it is not pushed."""


def _new_blocks(ds: CurrentDataset, target: DatasetRef,
                remote_head: Multihash | None) -> tuple[list[StoredBlock], list[StoredBlock]]:
    """The local chain (oldest first, every block checked) and the blocks of it the remote at
    ``remote_head`` lacks; refuses a remote that diverged, and a chain the reference refuses
    when there is something to push (the reference and coord's pull both refuse it, so the
    repository would hold a dataset no one can pull)."""
    blocks = list(ds.state().blocks)
    hashes = [b.hash for b in blocks]
    if remote_head is not None and remote_head not in hashes:
        raise _diverged(target, ds.id, str(remote_head))
    new = blocks[hashes.index(remote_head) + 1:] if remote_head else blocks
    refused = refused_by_reference(blocks) if new else []
    if refused:
        raise RefusedByReference(
            f"{ds.id}: {refused[0]}: the reference (and coord's pull) refuses such a block, so "
            f"no one could pull it from {target}; nothing was pushed. Its blocks cannot change: "
            f"define the dataset again under a new name (coord add), pull it, and push that")
    return blocks, new


def _current_plan(ws: Workspace, dataset_id: str, target: DatasetRef, remote: RemoteDataset,
                  repair: bool) -> _Plan | None:
    """A current-ODF dataset: objects, signatures and blocks, ``info/alias`` (the folder's name
    in the repository), then ``refs/head``."""
    ds = CurrentDataset(ws, dataset_id)
    current = CurrentRemote(remote)
    if current.holds_odf18():
        raise OtherVersion(f"{target} holds an ODF 0.18 dataset and {dataset_id} is current ODF "
                           "(0.39) (nothing was pushed): push it to another NAME")
    remote_head, token = current.read_head()
    blocks, new = _new_blocks(ds, target, remote_head)
    if not new and not repair:
        return None

    def move_head() -> None:
        alias = remote_path(target)  # as the reference names a dataset: by its alias
        if current.read(layout39.ALIAS, MAX_REF, "alias") != alias.encode():
            remote.io.write_bytes(remote.file(layout39.ALIAS), alias.encode())
        current.swap_head(new[-1].hash, token)

    return _Plan(len(new), current_uploads(ds, blocks if repair else new), move_head if new else None)


def _damaged(ws: Workspace, remote: RemoteDataset, uploads: list[tuple[Path, str]],
             have: dict[str, int], progress: Progress | None) -> set[str]:
    """The paths among ``uploads`` the repository holds with the local file's size but other
    bytes (read back and compared by SHA3-256; a wrong size is uploaded again anyway)."""
    present = [(p, rel) for p, rel in uploads if have.get(rel) == p.stat().st_size]

    def job(local: Path, rel: str, scratch: Path) -> Job[str | None]:
        def run(on_bytes) -> str | None:
            copy = scratch / uuid.uuid4().hex
            try:
                theirs = remote.io.get_file(remote.file(rel), copy, on_bytes, limit=local.stat().st_size,
                                            digest=True)
            finally:
                copy.unlink(missing_ok=True)
            with open(local, "rb") as f:
                ours = hashlib.file_digest(f, "sha3_256").digest()
            return rel if theirs != ours else None

        return Job(local.stat().st_size, run)

    with run_folder(ws.run_dir, "repair") as scratch:
        found = run_parallel([job(p, rel, scratch) for p, rel in present], "check remote files", progress)
    return {rel for rel in found if rel is not None}


class PushStatus(StrEnum):
    PUSHED = "pushed"  # the repository has every block of it now (possibly it had them before)
    FAILED = "failed"  # its push raised; the message is the error
    SKIPPED = "skipped"  # not tried: an input of it (direct or not) failed


@dataclass(frozen=True)
class PushOutcome:
    dataset_id: str
    status: PushStatus
    message: str
    result: PushResult | None = None  # PUSHED
    error: CoordError | OSError | None = None  # FAILED


def push_datasets(
    ws: Workspace, ids: list[str], to_repository: str | None = None, *, recursive: bool = False,
    repair: bool = False, progress: Callable[[str], Progress | None] = lambda dataset_id: None,
    report: Callable[[PushOutcome], None] = lambda outcome: None,
) -> list[PushOutcome]:
    """Push ``ids`` (with ``recursive``, and everything upstream of them), inputs first, each to
    ``to_repository`` under its own id or, without it, where it went last.

    Like a pull, a push of several keeps going past a dataset that fails; the datasets that
    read it are skipped, so a repository never gets a derivative whose inputs stayed behind."""
    graph = DatasetGraph(ws, current=CurrentDatasets(ws).inputs)  # either version's inputs
    for dataset_id in ids:
        if not graph.exists(dataset_id):
            raise DatasetNotFound(dataset_id)
    failed: dict[str, str] = {}  # dataset -> the failed dataset that stops it
    outcomes = []
    for dataset_id in graph.order(ids, recursive=recursive):
        inputs = graph.inputs(dataset_id)
        blocker = next((failed[i] for i in inputs if i in failed), None)
        if blocker is not None:
            failed[dataset_id] = blocker
            outcome = PushOutcome(dataset_id, PushStatus.SKIPPED,
                                  f"skipped: it depends on {blocker}, which failed")
        else:
            try:
                result = push_dataset(ws, dataset_id, to_repository, progress=progress(dataset_id),
                                      repair=repair)
                outcome = PushOutcome(dataset_id, PushStatus.PUSHED, result.message, result)
            except (CoordError, OSError) as e:
                failed[dataset_id] = dataset_id
                outcome = PushOutcome(dataset_id, PushStatus.FAILED, str(e), error=e)
        report(outcome)
        outcomes.append(outcome)
    return outcomes


def _uploads(ds: Dataset, new: list[ChainBlock]) -> list[tuple[str, list[tuple[Path, str]]]]:
    """(phase, [(local file, path in the remote dataset)]) in upload order, oldest block first."""
    # a slice is uploaded only if it is what its block records (missing or changed: refused)
    files = checked_slices(ds, [(cb.hash, cb.block) for cb in new])
    data = [(f, f.relative_to(ds.root).as_posix()) for f in files]
    checkpoints, meta = [], []
    for h in (cb.hash for cb in new):
        folder = ds.checkpoint_dir(h)
        for f in sorted(folder.rglob("*")) if folder.is_dir() else ():
            if f.is_file():
                rel = f.relative_to(folder).as_posix()
                checkpoints.append((f, f"{layout.checkpoint_dir(h)}/{rel}"))
        if ds.signature_path(h).exists():
            meta.append((ds.signature_path(h), layout.signature_file(h)))
        meta.append((ds.block_path(h), layout.block_file(h)))
    return [("data", data), ("checkpoints", checkpoints), ("metadata", meta)]


def _upload_job(remote: RemoteDataset, local: Path, rel: str) -> Job[None]:
    def run(on_bytes) -> None:
        remote.io.put_file(local, remote.file(rel), on_bytes)
        crash_point("push-file-uploaded")

    return Job(local.stat().st_size, run)
