"""The ODF Smart Transfer Protocol (SMTP v1), server side: ``coord serve``'s current-ODF (0.39)
datasets pulled from ``/{dataset}/pull`` and pushed to ``/{dataset}/push`` (WebSockets), as
kamu-cli v0.265's node serves them (``smart_protocol/axum_server_*_protocol.rs``; the frames
are ``repository.smart``'s). Objects move through the simple protocol's routes
(``transfer.py``): a pull's transfer URLs are ``GET /{dataset}/data|checkpoints/{hash}``, a
push's ``PUT`` to the same paths.

Invariants:
- a socket opens only with ``x-odf-smtp-version: 1`` (else 400) and past the service's guard
  (``api._Guard``: loopback only, or the bearer token; a page of another site is refused);
  ``/push`` and its uploads only with ``--allow-writes`` (else 403);
- a pull answers from one reading of the chain: the interval it plans is the one it sends;
- a push stages what it receives in its own folder (``run/push/<id>-<session>``): its blocks
  written one by one as the batch inflates, each hashed against its name, the batch refused
  past ``MAX_UNPACKED`` bytes unpacked (an ``Err`` naming the bound, then close code 1009, the
  WebSocket's "too big"; the service goes on); an upload is
  taken only if the session asked for it, no larger than announced, and hashing to its name;
  our extension, a pushed block's signature (``PUT /{dataset}/signatures/{hash}``, which the
  protocol lacks), is optional, bounded, and checked against its block like any pulled one;
  on ``DatasetPushComplete`` the staged folder is pulled into the dataset by
  ``current.pull_current``, the checks and the one append path of every pull (each block
  hashed against its name before it is decoded, the chain rules, the objects' hashes), under
  the dataset's lock: the new blocks must continue the head the pusher announced, which must
  still be the head (compare-and-swap), or nothing moves. A dropped socket leaves the head as
  it was and the session's folder is removed.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response

from ..errors import CoordError, Invalid, NotFound
from ..metadata.ids import DatasetRef, validate_dataset_id
from ..metadata.multiformats import Multihash
from ..repository.current import CurrentRemote, pull_current
from ..repository.fileio import LocalFileIO
from ..repository.remote import MAX_SIGNATURE, Diverged, RemoteDataset
from ..repository.smart import (
    HASH,
    VERSION,
    VERSION_HEADER,
    BatchTooLarge,
    SmartProtocolError,
    object_rel,
    pack_blocks,
    transfer_plan,
    unpack_blocks,
)
from ..store import layout
from ..store.dataset import CurrentDataset
from ..store.read import objects_of
from ..workspace import DatasetBusy, Workspace
from ..workspace import layout as ws_layout
from ..workspace.config import OdfVersion
from ..workspace.fsutil import atomic_write, remove

TAG = "odf-smart-transfer"
BUSY_WAIT_S = 30.0  # how long a push waits for the dataset's lock (the build service may hold it)
READ_ONLY = "this service is read-only (start it with --allow-writes)"


def _err(phase: tuple[str, str], message: str) -> dict[str, Any]:
    return {"Err": {"Internal": {"phase": {phase[0]: phase[1]}, "error_message": message}}}


class _Refused(Exception):
    """A frame the protocol does not expect: the socket is closed with this reason."""


@dataclass
class _Push:
    """One push session's staging: the blocks received, the uploads asked for."""

    dataset: str
    folder: Path  # a dataset folder's layout (blocks/, data/, checkpoints/, refs/head)
    expected: dict[str, int] = field(default_factory=dict)  # object file → its announced size
    received: set[str] = field(default_factory=set)
    optional: set[str] = field(default_factory=set)  # signatures: ours, the protocol has none


class _Uploads:
    """The push sessions waiting for objects, by (dataset, object file)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, str], _Push] = {}

    def expect(self, push: _Push, rel: str, size: int) -> None:
        with self._lock:
            push.expected[rel] = size
            self._waiting[(push.dataset, rel)] = push

    def take(self, dataset: str, rel: str) -> _Push | None:
        with self._lock:
            return self._waiting.pop((dataset, rel), None)

    def end(self, push: _Push) -> None:
        with self._lock:
            for rel in push.expected:
                if self._waiting.get((push.dataset, rel)) is push:
                    del self._waiting[(push.dataset, rel)]
        remove(push.folder)


def add_routes(app: FastAPI, ws: Workspace, allow_writes: bool) -> None:
    uploads = _Uploads()
    remove(ws.meta / ws_layout.RUN / "push")  # what pushes cut short by a killed service left

    def current(dataset: str) -> CurrentDataset:
        if ws.odf_of(validate_dataset_id(dataset)) is not OdfVersion.V039:
            raise NotFound(f"no current-ODF (0.39) dataset {dataset} (the transfer protocol serves "
                           "those only)")
        return CurrentDataset(ws, dataset)

    async def opened(socket: WebSocket, dataset: str, *, write: bool) -> bool:
        """Accept the socket, or answer why not (in HTTP, before the upgrade)."""
        problem = None
        if socket.headers.get(VERSION_HEADER) != VERSION:
            problem = 400, f"{VERSION_HEADER}: {VERSION} is required (ODF smart transfer protocol v1)"
        elif write and not allow_writes:
            problem = 403, READ_ONLY
        else:
            try:
                validate_dataset_id(dataset)
                if not write:
                    current(dataset)
                elif ws.odf_of(dataset) is OdfVersion.V018:
                    raise Invalid(f"{dataset} is an ODF 0.18 dataset; the smart protocol moves "
                                  "current-ODF (0.39) ones only")
            except CoordError as e:
                problem = 404 if isinstance(e, NotFound) else 400, str(e)
        if problem is not None:
            await socket.send_denial_response(JSONResponse({"error": problem[1]}, problem[0]))
            return False
        await socket.accept()
        return True

    def base_url(socket: WebSocket, dataset: str) -> str:
        scheme = "https" if socket.url.scheme == "wss" else "http"
        return f"{scheme}://{socket.url.netloc}/{dataset}"

    def echoed(socket: WebSocket) -> list[dict[str, str]]:
        given = socket.headers.get("authorization")
        return [{"name": "Authorization", "value": given}] if given else []

    @app.websocket("/{dataset}/pull")
    async def pull(socket: WebSocket, dataset: str) -> None:
        if not await opened(socket, dataset, write=False):
            return
        try:
            request = await _receive(socket)
            answer, blocks = await asyncio.to_thread(_plan, current(dataset), request)
            await socket.send_text(json.dumps(answer))
            if blocks is None:
                return
            base, headers = base_url(socket, dataset), echoed(socket)
            while True:  # metadata and objects requests, until the client closes
                request = await _receive(socket)
                if request == {}:  # DatasetPullMetadataRequest
                    batch = await asyncio.to_thread(_batch, current(dataset).root, blocks)
                    await socket.send_text(json.dumps({"blocks": batch}))
                elif isinstance(request, dict) and isinstance(request.get("object_files"), list):
                    await socket.send_text(json.dumps({"object_transfer_strategies": [
                        _download(base, headers, r) for r in request["object_files"]]}))
                else:
                    raise _Refused("expected a DatasetPullMetadataRequest or "
                                   "DatasetPullObjectsTransferRequest")
        except WebSocketDisconnect:
            pass
        except (_Refused, ValueError) as e:
            await socket.close(1008, str(e)[:120])

    @app.websocket("/{dataset}/push")
    async def push(socket: WebSocket, dataset: str) -> None:
        if not await opened(socket, dataset, write=True):
            return
        session = _Push(dataset, ws.meta / ws_layout.RUN / "push" / f"{dataset}-{uuid.uuid4().hex}")
        phase = ("Push", "InitialRequest")
        try:
            request = await _receive(socket)
            expected_head = _head_field(request, "current_head")
            if not isinstance(request, dict) or request.get("force_update_if_diverged") is not False:
                raise _Refused("expected a DatasetPushRequest without force_update_if_diverged "
                               "(a diverged push is refused: pull first)")
            actual = CurrentDataset(ws, dataset).head() if ws.odf_of(dataset) else None
            if actual != expected_head:  # checked again under the lock at the end
                await socket.send_text(json.dumps({"Err": {"InvalidHead": {
                    "actual_head": str(actual) if actual else None,
                    "expected_head": str(expected_head) if expected_head else None}}}))
                return
            await socket.send_text(json.dumps({"Ok": {}}))
            phase = ("Push", "MetadataRequest")
            request = await _receive(socket)
            if not isinstance(request, dict) or "new_blocks" not in request:
                raise _Refused("expected a DatasetPushMetadataRequest")
            await asyncio.to_thread(_stage, session, uploads, request["new_blocks"])
            await socket.send_text(json.dumps({"Ok": {}}))
            phase = ("Push", "ObjectsRequest")
            truncated = True
            while truncated:  # DatasetPushObjectsTransferRequest, in as many parts as the client sends
                request = await _receive(socket)
                if not isinstance(request, dict) or not isinstance(request.get("object_files"), list):
                    raise _Refused("expected a DatasetPushObjectsTransferRequest")
                truncated = request.get("is_truncated") is True
                strategies = [_upload(session, uploads, base_url(socket, dataset), echoed(socket),
                                      CurrentDataset(ws, dataset).root, r) for r in request["object_files"]]
                await socket.send_text(json.dumps({"Ok": {"object_transfer_strategies": strategies}}))
            phase = ("Push", "ObjectsUploadProgress")
            while True:  # DatasetPushObjectsUploadProgressResponse until Complete
                request = await _receive(socket)
                details = request.get("details") if isinstance(request, dict) else None
                if details == "Complete":
                    break
                if not (isinstance(details, dict) and "Running" in details):
                    raise _Refused("expected a DatasetPushObjectsUploadProgressResponse")
            phase = ("Push", "CompleteRequest")
            if await _receive(socket) != {}:
                raise _Refused("expected a DatasetPushComplete")
            missing = sorted(set(session.expected) - session.received - session.optional)
            if missing:
                await socket.send_text(json.dumps(_err(phase, f"{missing[0]} was not uploaded "
                                                       "(nothing was pushed)")))
                return
            try:
                await asyncio.to_thread(_complete, ws, dataset, session)
            except CoordError as e:
                await socket.send_text(json.dumps(_err(phase, str(e))))
                return
            await socket.send_text(json.dumps({}))  # DatasetPushCompleteConfirmed
        except WebSocketDisconnect:
            pass
        except (_Refused, SmartProtocolError, ValueError) as e:
            await socket.send_text(json.dumps(_err(phase, str(e))))
            await socket.close(1009 if isinstance(e, BatchTooLarge) else 1008, str(e)[:120])
        finally:
            uploads.end(session)

    def put(kind: str):
        async def upload(dataset: str, name: str, request: Request) -> Response:
            if not allow_writes:
                return JSONResponse({"error": READ_ONLY}, 403)
            if not HASH.fullmatch(name):
                return JSONResponse({"error": f"{name[:80]!r}: expected f1620 and 64 lowercase hex "
                                              "digits"}, 404)
            rel = f"{kind}/{name}"
            session = uploads.take(dataset, rel)
            if session is None:
                return JSONResponse({"error": f"{dataset}: no push is waiting for {rel}"}, 409)
            size = session.expected[rel]
            target = session.folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            digest, read = hashlib.sha3_256(), 0
            with open(target, "wb") as out:
                async for chunk in request.stream():
                    read += len(chunk)
                    if read > size:
                        break
                    digest.update(chunk)
                    out.write(chunk)
            problem = (f"more than the {size} bytes announced" if read > size
                       else None if rel in session.optional  # a signature: checked against its block
                       else f"{read} bytes, {size} announced" if read != size
                       else None if Multihash.parse(name).digest == digest.digest()
                       else "its bytes do not hash to its name")
            if problem is not None:
                target.unlink()
                return JSONResponse({"error": f"{rel}: {problem} (nothing was taken)"}, 400)
            session.received.add(rel)
            return Response(status_code=201)

        return upload

    for kind in ("data", "checkpoints", "signatures"):
        app.add_api_route(f"/{{dataset}}/{kind}/{{name}}", put(kind), methods=["PUT"], tags=[TAG],
                          summary=f"Upload a {kind} object a smart-protocol push asked for, or "
                                  "a pushed block's signature (needs --allow-writes)")


async def _receive(socket: WebSocket) -> Any:
    text = await socket.receive_text()
    try:
        return json.loads(text)
    except ValueError:
        raise _Refused("a frame is not JSON") from None


def _head_field(request: Any, name: str) -> Multihash | None:
    value = request.get(name) if isinstance(request, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not HASH.fullmatch(value):
        raise _Refused(f"{name}: expected a SHA3-256 multihash (f1620...)")
    return Multihash.parse(value)


def _plan(ds: CurrentDataset, request: Any) -> tuple[dict[str, Any], list[Multihash] | None]:
    """The answer to a ``DatasetPullRequest`` and the blocks it plans to send (oldest first;
    None: refused)."""
    phase = ("Pull", "InitialRequest")
    begin_after, stop_at = _head_field(request, "begin_after"), _head_field(request, "stop_at")
    if request.get("force_update_if_diverged") not in (False, None):
        return _err(phase, "force_update_if_diverged is not supported: the client decides what "
                           "to do with a diverged chain"), None
    state = ds.state()
    names = [b.hash for b in state.blocks]
    head = stop_at or state.head
    if head not in names:
        return _err(phase, f"{ds.id} has no block {head}"), None
    chain = names[:names.index(head) + 1]
    if begin_after is not None and begin_after not in chain:
        return {"Err": {"InvalidInterval": {"head": str(head), "tail": str(begin_after)}}}, None
    start = chain.index(begin_after) + 1 if begin_after is not None else 0
    sent = state.blocks[start:len(chain)]
    objects = [o for b in sent for o in objects_of(b.block) if o is not None]
    plan = transfer_plan(len(sent), sum((ds.root / layout.block_file(b.hash)).stat().st_size
                                        for b in sent), objects)
    return {"Ok": {"transfer_plan": plan}}, [b.hash for b in sent]


def _stage(session: _Push, uploads: _Uploads, batch: Any) -> None:
    """Write each pushed block to the session's folder as the batch inflates (one held at a
    time), then the last one's name as its head; their signatures are awaited."""
    head = None
    for name, stored in unpack_blocks(batch, f"push to {session.dataset}"):
        atomic_write(session.folder / layout.block_file(name), stored)
        session.optional.add(layout.signature_file(name))
        uploads.expect(session, layout.signature_file(name), MAX_SIGNATURE)
        head = name
    if head is None:
        raise _Refused("the push brings no block")
    atomic_write(session.folder / layout.HEAD, str(head).encode())


def _batch(root: Path, blocks: list[Multihash]) -> dict[str, Any]:
    return pack_blocks([(b, (root / layout.block_file(b)).read_bytes()) for b in blocks])


def _download(base: str, headers: list[dict[str, str]], reference: Any) -> dict[str, Any]:
    """A ``PullObjectTransferStrategy``: the object at the simple protocol's route."""
    rel, _ = object_rel(reference)
    return {"object_file": reference, "pull_strategy": "HttpDownload",
            "download_from": {"url": f"{base}/{rel}", "headers": headers, "expires_at": None}}


def _upload(session: _Push, uploads: _Uploads, base: str, headers: list[dict[str, str]], root: Path,
            reference: Any) -> dict[str, Any]:
    """A ``PushObjectTransferStrategy``: skip what the dataset holds, else a PUT it waits for."""
    rel, size = object_rel(reference)
    if (root / rel).is_file():  # content-addressed: the append path checks it again
        return {"object_file": reference, "push_strategy": "SkipUpload", "upload_to": None}
    uploads.expect(session, rel, size)
    return {"object_file": reference, "push_strategy": "HttpUpload",
            "upload_to": {"url": f"{base}/{rel}", "headers": headers, "expires_at": None}}


def _complete(ws: Workspace, dataset: str, session: _Push) -> None:
    """Install the staged push: a pull from its folder, which must continue the current head."""
    source = CurrentRemote(RemoteDataset(LocalFileIO(session.folder.parent), session.folder.name))
    waited = 0.0
    while True:
        try:
            pull_current(ws, DatasetRef(dataset), source, dataset, remember_source=False)
            return
        except DatasetBusy:  # the build service is pulling it: its lock is held briefly
            if waited >= BUSY_WAIT_S:
                raise
            time.sleep(0.1)
            waited += 0.1
        except Diverged:
            raise Diverged(f"{dataset} moved on during the push (another push?) and the pushed "
                           "blocks do not continue its head; nothing was pushed: pull, then push "
                           "again") from None

