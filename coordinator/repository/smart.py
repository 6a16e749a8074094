"""The ODF Smart Transfer Protocol (SMTP v1), client side: ``coord pull odf+http(s)://host/DS``
and ``coord push DS --to odf+http(s)://host/DS`` against a kamu node or ``coord serve``.

The frames are kamu-cli v0.265's (``src/adapter/http/src/smart_protocol/messages.rs``): JSON
text frames with snake_case fields, responses wrapped as Rust's ``Result`` (``{"Ok": ...}`` or
``{"Err": {...}}``), blocks carried as a gzip-compressed tar whose entries are named by the
block's multibase hash (oldest first), data files and checkpoints moved by plain HTTP to and
from the transfer URLs the server hands out. The WebSocket is opened with the header
``x-odf-smtp-version: 1`` and, when ``COORD_TOKEN`` is set, ``Authorization: Bearer``.

Invariants: nothing the server sends is trusted. A frame is bounded (``MAX_FRAME``) before it
is parsed as JSON; the tar is inflated as it is read, never past ``MAX_UNPACKED`` bytes in
all (a gzip bomb is refused in one line, nothing kept), bounded entry by entry (``MAX_BLOCK``)
and in number, and each entry is hashed against the name it comes under as it arrives, before
the next is read and before anything decodes it; a pull holds one batch at a time (it asks
for a second only when the first request brought none), so the bound is the pull's too. The
pull then runs the same checks and the one append path as from a folder
(``current.pull_current``); every object is downloaded no further than the size its checked
block records and hashed before anything parses it. The protocol carries no signatures: ours
are fetched beside it from the node's ``/{dataset}/signatures/{hash}`` (absent on a kamu node).

``COORD_TOKEN`` goes to the origin (scheme, host, port) of the URL the user named only: the
WebSocket there, our signature routes there, and a transfer URL only when the node names one
at that same origin (``HttpFileIO``); a transfer URL elsewhere (a bucket's presigned URL) gets
the headers the node gave for it and nothing else.
"""
from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import Unavailable
from ..metadata.multiformats import Multihash
from ..metadata.odf39.events import DataSlice
from ..store import layout
from .current import CurrentRemote, ObjectRef, object_file
from .fileio import HTTP_TIMEOUT_S, HttpFileIO, connection_problem, http_opener, token_headers
from .remote import MAX_BLOCK, RemoteDataset, SyncError

VERSION_HEADER = "x-odf-smtp-version"
VERSION = "1"
TAR_GZ = "application/tar+gzip"
# A frame's JSON. A metadata batch is a JSON array of byte values, which parses into a Python
# list of 8 bytes an entry: 64 MiB of "0," is at most 256 MiB of list (with 256 MiB a frame, 1 GiB),
# and still carries some 18 MiB of gzip, tens of thousands of blocks.
MAX_FRAME = 64 << 20
MAX_BLOCKS = 1 << 20  # entries of one metadata batch
# A metadata batch inflated (its tar: headers and blocks), for a pull (which holds one batch)
# and for a push coord serve takes: a chain's metadata, ~1 KiB a block, with room to spare.
MAX_UNPACKED = 256 << 20
HASH = re.compile(r"f1620[0-9a-f]{64}")


class SmartProtocolError(SyncError, Unavailable):
    """The node refused a request, broke the protocol or could not be reached."""


class NotAccepted(SmartProtocolError):
    """The node has no such upload route (404, 405)."""


class BatchTooLarge(SmartProtocolError):
    """A metadata batch inflates past ``MAX_UNPACKED`` bytes (a gzip bomb, or a chain too long
    to move in one batch)."""


# --- frames both sides share ----------------------------------------------------------------


def pack_blocks(blocks: list[tuple[Multihash, bytes]]) -> dict[str, Any]:
    """A ``MetadataBlocksBatch``: the blocks' stored bytes (oldest first) in a tar+gzip, each
    entry named by the block's multibase hash, as the reference builds it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, stored in blocks:
            entry = tarfile.TarInfo(str(name))
            entry.size = len(stored)
            tar.addfile(entry, io.BytesIO(stored))
    return {"num_blocks": len(blocks), "media_type": TAR_GZ, "encoding": "raw",
            "payload": list(buffer.getvalue())}


def unpack_blocks(batch: Any, where: str) -> Iterator[tuple[Multihash, bytes]]:
    """The (name, stored bytes) of a ``MetadataBlocksBatch``'s entries in its order, each one
    given as soon as it is inflated and hashed against its name, before the next is read;
    bounded one by one (``MAX_BLOCK``), in number (``MAX_BLOCKS``) and together
    (``MAX_UNPACKED``)."""
    if not isinstance(batch, dict) or batch.get("media_type") != TAR_GZ or batch.get("encoding") != "raw":
        raise SmartProtocolError(f"{where}: the metadata batch is not a raw {TAR_GZ} (nothing was "
                                 "transferred)")
    try:
        given = batch.get("payload")
        if not isinstance(given, list):
            raise TypeError
        payload = bytes(given)
    except (TypeError, ValueError):
        raise SmartProtocolError(f"{where}: the metadata batch's payload is not an array of bytes") from None
    try:
        # "r|": a stream, read once, front to back, through the bound
        with tarfile.open(fileobj=_Inflated(payload, where), mode="r|") as tar:
            for count, entry in enumerate(tar):
                if count >= MAX_BLOCKS or not entry.isfile() or not HASH.fullmatch(entry.name) \
                        or entry.size > MAX_BLOCK:
                    raise SmartProtocolError(f"{where}: metadata batch entry {entry.name[:80]!r}: not a "
                                             f"block named by its hash, of at most {MAX_BLOCK} bytes")
                stored = tar.extractfile(entry)
                assert stored is not None  # a regular file
                name, data = Multihash.parse(entry.name), stored.read()
                if Multihash.sha3_256(data) != name:
                    raise SmartProtocolError(f"{where}: metadata batch entry {entry.name}: its bytes do "
                                             "not hash to its name (nothing was transferred)")
                tar.members.clear()  # type: ignore[attr-defined]  # tarfile keeps every header it reads
                yield name, data
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise SmartProtocolError(f"{where}: the metadata batch is no valid tar+gzip ({e})") from None


class _Inflated(io.RawIOBase):
    """A batch's tar, inflated as tarfile reads it; ``BatchTooLarge`` past ``MAX_UNPACKED``
    bytes, before more is inflated."""

    def __init__(self, payload: bytes, where: str):
        super().__init__()
        self.gzip = gzip.GzipFile(fileobj=io.BytesIO(payload), mode="rb")
        self.left, self.where = MAX_UNPACKED, where

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self.gzip.read(min(len(buffer), self.left + 1))  # GzipFile inflates no more than asked
        self.left -= len(chunk)
        if self.left < 0:
            raise BatchTooLarge(f"{self.where}: the metadata batch holds more than "
                                f"{MAX_UNPACKED >> 20} MiB unpacked; refused (nothing was transferred)")
        buffer[:len(chunk)] = chunk
        return len(chunk)


def transfer_plan(blocks: int, block_bytes: int, objects: list[ObjectRef]) -> dict[str, int]:
    """A ``TransferPlan``: what a pull sends or a push brings."""
    return {"num_blocks": blocks, "num_objects": len(objects),
            "num_records": sum(o.offset_interval.end - o.offset_interval.start + 1
                               for o in objects if isinstance(o, DataSlice)),
            "bytes_in_raw_blocks": block_bytes, "bytes_in_raw_objects": sum(o.size for o in objects)}


def object_ref(obj: ObjectRef) -> dict[str, Any]:
    """An ``ObjectFileReference``."""
    return {"object_type": "DataSlice" if isinstance(obj, DataSlice) else "Checkpoint",
            "physical_hash": str(obj.physical_hash), "size": obj.size}


def object_rel(reference: Any) -> tuple[str, int]:
    """Where a dataset folder keeps the object an ``ObjectFileReference`` names, and its size;
    a malformed reference is a ValueError."""
    if not isinstance(reference, dict):
        raise ValueError("an object file reference is a JSON object")
    kind, name, size = (reference.get(k) for k in ("object_type", "physical_hash", "size"))
    if not isinstance(name, str) or not HASH.fullmatch(name) or not isinstance(size, int) or size < 0:
        raise ValueError(f"object file reference {str(reference)[:120]}: expected a SHA3-256 "
                         "physical_hash and a size")
    if kind == "DataSlice":
        return layout.data_file(Multihash.parse(name)), size
    if kind == "Checkpoint":
        return layout.checkpoint_file(Multihash.parse(name)), size
    raise ValueError(f"object_type {str(kind)[:40]!r}: expected DataSlice or Checkpoint")


# --- the client -----------------------------------------------------------------------------


def http_url(url: str) -> str:
    """``odf+http(s)://host/path/DS`` → ``http(s)://host/path/DS``."""
    return url.removeprefix("odf+")


class Session:
    """One WebSocket exchange with a node (``/{dataset}/pull`` or ``/push``)."""

    def __init__(self, url: str, action: str):
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        parts = urlsplit(http_url(url))
        self.where = f"{url}/{action}"
        ws_url = f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}{parts.path}/{action}"
        try:
            self.socket = connect(ws_url, additional_headers={VERSION_HEADER: VERSION, **token_headers()},
                                  open_timeout=HTTP_TIMEOUT_S, max_size=MAX_FRAME,
                                  user_agent_header="odf-coordinator")
        except InvalidStatus as e:
            body = e.response.body.decode("utf-8", "replace") if e.response.body else ""
            try:
                body = json.loads(body).get("error", body)
            except (ValueError, AttributeError):
                pass
            raise SmartProtocolError(f"{self.where}: HTTP {e.response.status_code} {body}".rstrip()) from None
        except (OSError, TimeoutError, WebSocketException) as e:
            raise SmartProtocolError(f"{self.where}: {e.__class__.__name__}: {e}") from None

    def ask(self, request: dict[str, Any], phase: str) -> Any:
        """Send a frame and return the answer, parsed."""
        self.send(request, phase)
        return self.receive(phase)

    def send(self, request: dict[str, Any], phase: str) -> None:
        from websockets.exceptions import WebSocketException

        try:
            self.socket.send(json.dumps(request))
        except (OSError, WebSocketException) as e:
            raise SmartProtocolError(f"{self.where}: the connection broke off at the {phase} "
                                     f"({e.__class__.__name__})") from None

    def receive(self, phase: str) -> Any:
        from websockets.exceptions import WebSocketException

        try:
            frame = self.socket.recv(timeout=HTTP_TIMEOUT_S * 10)
            return json.loads(frame)
        except (OSError, TimeoutError, WebSocketException) as e:
            raise SmartProtocolError(f"{self.where}: the connection broke off at the {phase} "
                                     f"({e.__class__.__name__})") from None
        except ValueError:
            raise SmartProtocolError(f"{self.where}: the {phase} answer is not JSON") from None

    def close(self) -> None:
        self.socket.close()


def result(answer: Any, where: str, phase: str) -> tuple[str, Any]:
    """(``"Ok"`` or ``"Err"``, the content) of a ``Result``-wrapped answer; an ``Internal``
    error is raised in one line."""
    if not isinstance(answer, dict) or len(answer) != 1 or next(iter(answer)) not in ("Ok", "Err"):
        raise SmartProtocolError(f"{where}: the {phase} answer is not an Ok or an Err")
    tag, content = next(iter(answer.items()))
    if tag == "Err" and isinstance(content, dict) and "Internal" in content:
        internal = content["Internal"]
        message = internal.get("error_message", "") if isinstance(internal, dict) else ""
        raise SmartProtocolError(f"{where}: the node refused the {phase}: {str(message)[:300]}")
    return tag, content


def field(content: Any, name: str, where: str, phase: str) -> Any:
    if not isinstance(content, dict) or name not in content:
        raise SmartProtocolError(f"{where}: the {phase} answer has no {name}")
    return content[name]


class SmartPull(CurrentRemote):
    """A node's dataset read through the smart protocol, for ``current.pull_current``: its
    blocks come in one batch, its objects from the transfer URLs the node gives."""

    def __init__(self, url: str):
        base, _, name = http_url(url).rpartition("/")
        super().__init__(RemoteDataset(_TransferIO(base), name))
        self.url = url
        self.blocks: dict[str, bytes] = {}  # block file → stored bytes, as the batch brought them
        self.session: Session | None = None

    def remote_head(self, local_head: Multihash | None) -> Multihash | None:
        head = self._request(local_head)
        if head is None and local_head is not None:  # the node has no block after the local head:
            return self._request(None)  # it is behind or elsewhere; the whole chain says which
        return head

    def _request(self, begin_after: Multihash | None) -> Multihash | None:
        """The node's head from a pull request starting after ``begin_after``; its blocks kept.
        None: the node's chain does not hold ``begin_after``."""
        self.close()
        self.blocks = {}  # one batch held at a time
        self.session = Session(self.url, "pull")
        tag, content = result(self.session.ask(
            {"begin_after": str(begin_after) if begin_after else None, "stop_at": None,
             "force_update_if_diverged": False}, "pull request"), self.url, "pull request")
        if tag == "Err":
            if isinstance(content, dict) and "InvalidInterval" in content:
                return None
            raise SmartProtocolError(f"{self.url}: the node refused the pull: {str(content)[:300]}")
        answer = self.session.ask({}, "metadata request")  # DatasetPullMetadataRequest
        head = begin_after
        for name, stored in unpack_blocks(field(answer, "blocks", self.url, "metadata request"), self.url):
            self.blocks[layout.block_file(name)] = stored
            head = name
        return head

    def read(self, rel: str, limit: int, what: str) -> bytes | None:
        if rel.startswith("blocks/"):
            return self.blocks.get(rel)
        return super().read(rel, limit, what)  # a signature: our node's extra route

    def will_download(self, objects: list[ObjectRef]) -> None:
        """Ask the node where to download ``objects`` from."""
        if not objects:
            return
        assert self.session is not None  # remote_head opened it
        answer = self.session.ask({"object_files": [object_ref(o) for o in objects]}, "objects request")
        strategies = field(answer, "object_transfer_strategies", self.url, "objects request")
        io_ = self.io
        assert isinstance(io_, _TransferIO)
        for s in strategies if isinstance(strategies, list) else []:
            try:
                rel, _ = object_rel(s.get("object_file"))
                source = s["download_from"]
                url = source["url"]
                headers = {h["name"]: h["value"] for h in source.get("headers") or []}
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise SmartProtocolError(f"{self.url}: a transfer strategy is malformed ({e})") from None
            if s.get("pull_strategy") != "HttpDownload" or urlsplit(str(url)).scheme not in ("http", "https"):
                raise SmartProtocolError(f"{self.url}: {rel}: expected an HttpDownload from an "
                                         "http(s) URL")
            io_.transfers[self.file(rel)] = (str(url), {str(k): str(v) for k, v in headers.items()})
        missing = [o for o in objects if self.file(object_file(o)) not in io_.transfers]
        if missing:
            raise SmartProtocolError(f"{self.url}: the node gave no transfer URL for "
                                     f"{object_file(missing[0])}")

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


class _TransferIO(HttpFileIO):
    """HTTP reads at the dataset's simple-protocol routes, objects at their transfer URLs."""

    def __init__(self, root: str):
        super().__init__(root)
        self.transfers: dict[str, tuple[str, dict[str, str]]] = {}  # path → URL, its headers

    def url(self, path: str) -> str:
        return self.transfers[path][0] if path in self.transfers else super().url(path)

    def request_headers(self, path: str) -> dict[str, str]:
        return self.transfers[path][1] if path in self.transfers else {}


@contextmanager
def smart_pull(url: str) -> Iterator[SmartPull]:
    source = SmartPull(url)
    try:
        yield source
    finally:
        source.close()


def drain(session: Session) -> None:
    """Drop the upload-progress pings a node sent while the client uploaded (a kamu node asks
    every few seconds; the answer that counts is the ``Complete`` sent next)."""
    try:
        while True:
            session.socket.recv(timeout=0)
    except TimeoutError:
        pass


def put_object(url: str, headers: dict[str, str], local: Path, on_bytes: Callable[[int], None]) -> None:
    """Upload ``local`` by ``PUT`` to a transfer URL, streamed; any answer but 2xx is one line."""
    import urllib.error
    import urllib.request

    class Counted(io.FileIO):
        def read(self, n: int | None = -1) -> bytes:
            chunk = super().read(n)
            on_bytes(len(chunk))
            return chunk

    size = local.stat().st_size
    with Counted(local, "rb") as body:
        request = urllib.request.Request(url, data=body, method="PUT", headers={
            "Content-Length": str(size), "Content-Type": "application/octet-stream",
            "User-Agent": "odf-coordinator", **headers})
        try:
            http_opener().open(request, timeout=HTTP_TIMEOUT_S).close()
        except urllib.error.HTTPError as e:
            detail = e.read(300).decode("utf-8", "replace")
            e.close()
            error = NotAccepted if e.code in (404, 405) else SmartProtocolError
            raise error(f"{url}: HTTP {e.code} {detail}".rstrip()) from None
        except urllib.error.URLError as e:
            raise SmartProtocolError(f"{url}: the upload failed ({connection_problem(e.reason)})") from None
        except OSError as e:
            raise SmartProtocolError(f"{url}: the upload failed ({e})") from None
