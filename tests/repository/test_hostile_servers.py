"""What a hostile server can make ``coord pull`` do. Over the smart protocol
(``odf+http://...``), a gzip bomb for a metadata batch is refused in one line once
``MAX_UNPACKED`` bytes are inflated, with the pull's memory well below the bomb's size, and
``COORD_TOKEN`` reaches the node the user named, never a transfer URL the node names on another
origin. From an HTTP repository, a redirect is followed within its origin only (with the
token), never to another origin or to ftp://. The node is a real WebSocket server on loopback
(websockets), the web servers real http.servers on their own ports (each its own origin);
``coord`` runs in its own process."""
from __future__ import annotations

import gzip
import json
import os
import select
import socket
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

from coordinator.metadata.multiformats import Multihash
from coordinator.repository.remote import MAX_BLOCK
from coordinator.repository.smart import MAX_UNPACKED, TAR_GZ, object_rel, pack_blocks, transfer_plan
from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset
from coordinator.store.read import objects_of
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..serve.test_simple_transfer import make_origin
from ..support.cli import coord, coord_command, coord_env
from .test_current_odf import current_ws, records
from .test_http_repository import failed_pull

TOKEN = "a-token-for-the-node-only"


def gzip_bomb(entries: int) -> dict:
    """A ``MetadataBlocksBatch`` of ``entries`` copies of one block of ``MAX_BLOCK`` zero bytes,
    named by its hash (so each entry passes every check of its own): ~16 KiB of gzip each,
    ``entries`` x 16 MiB inflated. The tar is gzipped member by member, as gzip allows."""
    stored = bytes(MAX_BLOCK)
    entry = tarfile.TarInfo(str(Multihash.sha3_256(stored)))
    entry.size = len(stored)
    member = gzip.compress(entry.tobuf(tarfile.GNU_FORMAT) + stored)
    payload = member * entries + gzip.compress(bytes(2 * tarfile.BLOCKSIZE))  # the tar's end
    return {"num_blocks": entries, "media_type": TAR_GZ, "encoding": "raw", "payload": list(payload)}


@contextmanager
def node(answer: Callable[[ServerConnection], None]) -> Iterator[tuple[str, list[str | None]]]:
    """A WebSocket server on a free loopback port whose ``/{dataset}/pull`` socket ``answer``
    serves; plain HTTP requests (our signature route) get a 404. Its URL and the Authorization
    header of every request it got (None: none)."""
    seen: list[str | None] = []

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return connection.respond(404, "no such route\n")
        return None

    server = serve(answer, "127.0.0.1", 0, process_request=process_request)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.socket.getsockname()[1]}", seen
    finally:
        server.shutdown()
        thread.join()


class _Recording(SimpleHTTPRequestHandler):
    """Serves its folder, or redirects where the server's ``redirect`` says; records the
    Authorization header of each request."""

    def do_GET(self) -> None:
        self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        to = self.server.redirect(self.path)  # type: ignore[attr-defined]
        if to is None:
            super().do_GET()
            return
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *_) -> None:
        pass


@contextmanager
def web(folder: Path, redirect: Callable[[str], str | None] = lambda _: None
        ) -> Iterator[tuple[str, list[str | None]]]:
    """``folder`` served on a free loopback port (an origin of its own), a request redirected
    where ``redirect(path)`` says (None: served): its URL and the Authorization header of every
    request it got (None: none)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Recording, directory=str(folder)))
    server.seen, server.redirect = [], redirect  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def pull_started(conn: ServerConnection, plan: dict) -> None:
    """Take the pull request and answer it with ``plan``; then take the metadata request."""
    json.loads(conn.recv())  # DatasetPullRequest
    conn.send(json.dumps({"Ok": {"transfer_plan": plan}}))
    assert json.loads(conn.recv()) == {}  # DatasetPullMetadataRequest


@pytest.fixture
def other(tmp_path) -> Workspace:
    return current_ws(tmp_path / "other")


def test_a_gzip_bomb_for_a_metadata_batch_is_refused_with_the_pull_s_memory_bounded(other, tmp_path):
    bomb = gzip_bomb(64)  # 1 GiB inflated, ~1 MiB of gzip

    def answer(conn: ServerConnection) -> None:
        pull_started(conn, transfer_plan(64, 64 * MAX_BLOCK, []))
        conn.send(json.dumps({"blocks": bomb}))
        with suppress(ConnectionClosed):
            conn.recv()  # until the client goes

    out, err = tmp_path / "out", tmp_path / "err"
    with node(answer) as (url, _), open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(coord_command(["pull", f"odf+{url}/cities"]), cwd=other.root,
                                env=coord_env(None), stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)  # the pull's own peak memory, in KiB
        proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in err.read_text().splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, err.read_text()
    assert f"odf+{url}/cities: the metadata batch holds more than {MAX_UNPACKED >> 20} MiB unpacked" \
        in lines[0]
    # imports ~130 MiB, at most the bound's blocks held, the allocator's slack on a loaded
    # machine (650 MiB seen once, 180 MiB quiet); the bomb unbounded: over 1 GiB
    assert usage.ru_maxrss * 1024 < 3 * MAX_UNPACKED
    assert not CurrentDataset(other, "cities").exists()


def test_the_token_goes_to_the_node_and_not_to_a_transfer_url_on_another_origin(other, tmp_path):
    origin = make_origin(tmp_path)
    ds = CurrentDataset(origin, "cities")
    blocks = ds.state().blocks
    objects = [o for b in blocks for o in objects_of(b.block) if o is not None]
    batch = pack_blocks([(b.hash, (ds.root / layout.block_file(b.hash)).read_bytes()) for b in blocks])

    with web(ds.root) as (transfers, seen_there):
        def answer(conn: ServerConnection) -> None:
            pull_started(conn, transfer_plan(len(blocks), 0, objects))
            conn.send(json.dumps({"blocks": batch}))
            for frame in conn:  # DatasetPullObjectsTransferRequest, until the client goes
                conn.send(json.dumps({"object_transfer_strategies": [
                    {"object_file": r, "pull_strategy": "HttpDownload", "download_from": {
                        "url": f"{transfers}/{object_rel(r)[0]}", "headers": [], "expires_at": None}}
                    for r in json.loads(frame)["object_files"]]}))

        with node(answer) as (url, seen_by_node):
            out = coord("pull", f"odf+{url}/cities", cwd=other.root, env={"COORD_TOKEN": TOKEN}).stdout
    assert "cities: new dataset: pulling 5 blocks" in out
    assert verify_folder(CurrentDataset(other, "cities").root) == []
    assert records(other, "cities") == records(origin, "cities")
    assert seen_by_node and set(seen_by_node) == {f"Bearer {TOKEN}"}
    assert len(seen_there) == len(objects) and set(seen_there) == {None}


# --- redirects from an HTTP repository ---------------------------------------------------------


@pytest.fixture
def served(tmp_path) -> Path:
    """A folder an HTTP repository's web server serves: ``origin``'s datasets, ``cities`` (current
    ODF) among them."""
    return make_origin(tmp_path).meta / "datasets"


def test_a_redirect_to_another_origin_is_not_followed_and_the_token_stays_home(other, served, monkeypatch):
    monkeypatch.setenv("COORD_TOKEN", TOKEN)
    with web(served) as (there, seen_there), \
            web(served, lambda path: there + path) as (here, seen_here):
        line = failed_pull(other, f"{here}/cities")
    assert f"{here}/cities/refs/head: HTTP 302 Found, redirected to {there}/cities/refs/head, another " \
        "origin (scheme, host, port): not followed" in line
    assert seen_here == [f"Bearer {TOKEN}"] and seen_there == []


def test_a_redirect_to_ftp_is_not_followed(other, served):
    with socket.create_server(("127.0.0.1", 0)) as ftp:
        to = f"ftp://127.0.0.1:{ftp.getsockname()[1]}"
        with web(served, lambda path: to + path) as (here, _):
            line = failed_pull(other, f"{here}/cities")
        assert f"redirected to {to}/cities/refs/head, another origin" in line
        assert select.select([ftp], [], [], 0)[0] == []  # no connection waits to be accepted


def test_a_redirect_within_the_origin_is_followed_with_the_token(other, served):
    moved = served.parent / "moved"
    served.rename(moved)  # the server answers /moved/cities/... and redirects /cities/... there
    with web(moved.parent, lambda path: None if path.startswith("/moved/") else "/moved" + path) \
            as (here, seen):
        out = coord("pull", f"{here}/cities", cwd=other.root, env={"COORD_TOKEN": TOKEN}).stdout
    assert "cities: new dataset: pulling 5 blocks" in out
    assert verify_folder(CurrentDataset(other, "cities").root) == []
    assert len(seen) > 2 and set(seen) == {f"Bearer {TOKEN}"}
