"""``coord serve``: the build service, the folder watcher and the HTTP server in one process.

The process holds the workspace's serve lease (``workspace/served.py``) from before the
first pull until after the last. uvicorn owns SIGINT/SIGTERM: on either it stops accepting
requests and returns, then the build service finishes its current pull and stops its engine.
"""
from __future__ import annotations

import ipaddress
import os
import signal
import socket
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import Invalid, Unavailable
from ..store.overview import CurrentDatasets
from ..workspace import Workspace
from ..workspace.config import OdfVersion
from ..workspace.graph import DatasetGraph
from ..workspace.served import ServeLease
from .events import EventBus
from .watch import FolderWatch, watched_pattern

SHUTDOWN_GRACE_S = 3  # open event streams are cut after this long


class ServeError(Invalid):
    """An option of `coord serve` that cannot be used as given."""


@dataclass(frozen=True)
class Listen:
    bind: str
    port: int
    token_file: Path | None
    allow_writes: bool


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def read_token(path: Path) -> str:
    """The bearer token in ``path``: a file only its owner can read, 16 characters or more."""
    try:
        mode = path.stat().st_mode
        token = path.read_text().strip()
    except OSError as e:
        raise ServeError(f"--token-file {path}: {e.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ServeError(f"--token-file {path}: readable by other users (chmod 600 {path})")
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ServeError(f"--token-file {path}: the token must be one word of 16 characters or more "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


def serve(ws: Workspace, listen: Listen) -> None:
    import uvicorn

    from .api import Access, create_app
    from .build_service import BuildService

    if not is_loopback(listen.bind) and listen.token_file is None:
        raise ServeError(f"--bind {listen.bind} is reachable from other machines: give --token-file "
                         "(every request must then carry that token)")
    token = read_token(listen.token_file) if listen.token_file is not None else None
    settings = ws.config().serve
    with ServeLease(ws.meta):
        bus = EventBus()
        service = BuildService(ws, settings, bus)
        graph = DatasetGraph(ws, current=CurrentDatasets(ws).inputs)
        # a current-ODF root is polled on its schedule: its folder is not watched (yet)
        patterns = {d: p for d in service.roots if ws.odf_of(d) is OdfVersion.V018
                    and (p := watched_pattern(graph.state(d).source, ws.root)) is not None}
        watch = FolderWatch(patterns, lambda ids: service.request(*ids))
        sock = _listening_socket(listen.bind, listen.port)
        app = create_app(ws, service, bus, Access(token, listen.allow_writes))
        config = uvicorn.Config(app, log_level="warning", access_log=False,
                                timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(f"coord serve: http://{shown}:{port}/ (PID {os.getpid()}, {len(service.managed)} datasets, "
              f"{len(patterns)} folders watched, {'read-write' if listen.allow_writes else 'read-only'})",
              flush=True)
        service.start()
        watch.start()
        try:
            _server_class(bus)(config).run(sockets=[sock])
        finally:
            watch.stop()
            service.stop()
            print("coord serve: stopped", file=sys.stderr, flush=True)


def _server_class(bus: EventBus):
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM/SIGINT once it has stopped, which would end the process
        before the build service finishes its pull; here the signal only stops the server,
        and ends the event streams, which would otherwise hold the shutdown up."""

        def handle_exit(self, sig: int, frame: object) -> None:
            bus.close()
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    return Server


def _listening_socket(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # inherited by every accepted connection: a response written in two parts (head, body)
    # must not wait ~40 ms for the client's delayed ACK
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((bind, port))
    except OSError as e:
        sock.close()
        raise Unavailable(f"cannot listen on {bind}:{port}: {e.strerror}") from None
    sock.listen(128)
    return sock
