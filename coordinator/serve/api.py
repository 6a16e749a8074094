"""The HTTP API of ``coord serve`` (FastAPI; OpenAPI page at ``/docs``), its web view at ``/``,
and its current-ODF datasets' folders for other workspaces to pull (``transfer``).

Every answer is built by the same services the CLI words (status, lineage, catalog, tail):
one implementation, two front ends. Answers are JSON; errors are JSON too, ``{"error": ...}``
with the status of the error's category (``status_of``: not found 404, conflict 409,
invalid 400, unavailable 503, any other refusal 400), never a traceback. Every parameter is
checked before use (ASCII digits, bounded lengths and numbers, timestamps within range), so
bad input is a 4xx; anything else raised is a bug: a 500 naming it in one line (its type and
message), its traceback logged once to the service's stderr.

Security (the invariants ``server.py`` sets up and the tests check):
- with a token, every request, ``/docs`` included, needs ``Authorization: Bearer TOKEN`` (or
  the cookie the page at ``/?token=TOKEN`` sets) or gets 401; the comparison is constant-time;
- without one (loopback only), the ``Host`` header must name the loopback, so a web page
  cannot reach the API through DNS rebinding;
- writes (a pull's or a push's ``POST``, an ingest, a smart-protocol push and its uploads)
  exist only with ``--allow-writes`` (else 403); ``POST /api/sql`` only reads;
- a browser request from another origin to the API (``/api/...``, GETs included: a query
  runs on a GET), any write or any WebSocket is refused (403), so a page the user opens cannot post a form
  to it or make it run a query (an ``<img>`` is enough to send a GET). The pages (``/``,
  ``/lineage/DS``, ``/docs``) stay open to links from anywhere; their own requests are
  same-origin;
- a request body must say its length or come chunked (else 411), not both (else 400, as a
  length of one header may not be the length of the body), and holds at most ``MAX_BODY``
  bytes (an ingest's, ``/ingest``, at most ``MAX_INGEST_BODY``, streamed to a file in a run
  folder; a push's object upload: the size the push announced, ``smart.py``): a length above
  it is refused 413 before the body is read, and the bytes are counted as they arrive, so a
  body that grows past it is refused 413 at that point, none of the rest read; ``/api/sql``
  runs each query bounded (``query/bounded.py``).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import re
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from http.cookies import SimpleCookie
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from ..errors import Conflict, CoordError, Invalid, NotFound, Unavailable, category
from ..metadata.ids import validate_dataset_id
from ..metadata.yaml_codec import to_dict
from ..trust.authorship import block_signers
from ..workspace import Dataset, DatasetNotFound, Workspace
from ..workspace.config import OdfVersion
from . import smart, transfer
from .answers import Answers
from .build_service import BuildService
from .events import EventBus
from .web_view import PAGE

COOKIE = "coord_token"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
HEARTBEAT_S = 15.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


class Direction(StrEnum):
    up = "up"
    down = "down"
    both = "both"


class FieldDirection(StrEnum):
    backward = "backward"
    forward = "forward"


SQL_MAX_TEXT = 100_000  # characters of one query
MAX_BODY = 1 << 20  # bytes of a request's body (a JSON query and its options)
MAX_INGEST_BODY = 1 << 32  # bytes of data pushed in one request (streamed to a file, not held)
# A smart-protocol push's object upload: bounded by the size the push announced (serve/smart.py).
_UPLOAD = re.compile(r"/[^/]+/(data|checkpoints|signatures)/f1620[0-9a-f]{64}")
PROVENANCE_MAX_SECONDS = 600.0  # an engine start and a replay


class TooManyQueries(Unavailable):
    pass


class SqlRequest(BaseModel):
    """One read-only query (DuckDB SQL) and how much of its answer to give."""

    q: str = Field(..., min_length=1, max_length=SQL_MAX_TEXT)
    limit: int | None = Field(None, ge=1, description="rows at most (default 1000, up to serve.sqlMaxRows)")
    timeout_s: float | None = Field(None, gt=0, description="seconds at most, parsing included "
                                                            "(default 10, up to serve.sqlTimeout)")
    as_at: str | None = Field(None, max_length=100,
                              description="RFC 3339 system time, or a block hash prefix")
    as_of: str | None = Field(None, max_length=100,
                              description='RFC 3339 event time the states ("<id>@state") are read as of')
    receipt: bool = Field(False, description="also a signed receipt of the whole answer, checked by "
                                             "coord verify-receipt (schemas/RECEIPT.md)")


@dataclass(frozen=True)
class Access:
    token: str | None  # None: loopback only, no token asked
    allow_writes: bool


def create_app(ws: Workspace, service: BuildService, bus: EventBus, access: Access) -> Asgi:
    app = FastAPI(title="coord serve", version="1",
                  description="Datasets of one workspace: status, chains, records, lineage, commits.")
    _errors(app, str(ws.root))
    answers = Answers(ws, service)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/api/datasets", summary="Every dataset with its status")
    async def datasets() -> Response:
        return _ok(await answers.datasets())

    @app.get("/api/datasets/{dataset_id}", summary="One dataset with its status")
    async def dataset(dataset_id: str) -> Response:
        return _ok(await answers.dataset(validate_dataset_id(dataset_id)))

    @app.get("/api/datasets/{dataset_id}/chain", summary="The metadata chain, newest block first, paged")
    def chain(dataset_id: str, offset: int = Query(0, ge=0),
              limit: int = Query(50, ge=1, le=1000)) -> dict:
        ds = _existing(ws, dataset_id)
        if ws.odf_of(dataset_id) is OdfVersion.V039:
            return _current_chain(ws, dataset_id, offset, limit)
        blocks = list(ds.chain())
        page = blocks[offset:offset + limit]
        signers = block_signers(ws, dataset_id, blocks)[offset:offset + limit]
        return {"dataset": dataset_id, "total": len(blocks), "offset": offset, "limit": limit,
                "blocks": [{"hash": c.hash.hex(), "signer": s.key.hex() if s.key else None,
                            "authorship": s.status.value, "block": to_dict(c.block)}
                           for c, s in zip(page, signers, strict=True)]}

    @app.get("/api/datasets/{dataset_id}/tail", summary="The last records, now or as at a time or block")
    async def tail(dataset_id: str, n: int = Query(10, ge=1, le=10_000),
             as_at: str | None = Query(None, description="RFC 3339 system time, or a block hash prefix",
                                       max_length=100),
             state: bool = Query(False, description="the last rows of a snapshot or ledger root's "
                                                    "state (one row per primary key) instead"),
             as_of: str | None = Query(None, description="with state: RFC 3339 event time it is read as of",
                                       max_length=100)) -> Response:
        if as_of is not None and not state:
            raise Invalid("as_of reads a state: give state=true")
        return _ok(await answers.tail(validate_dataset_id(dataset_id), n, as_at, state, as_of))

    @app.get("/api/datasets/{dataset_id}/diff",
             summary="The rows added, removed and changed between two versions (as coord diff -o json)")
    def diff(dataset_id: str,
             from_: str | None = Query(None, alias="from", max_length=100,
                                       description="block hash prefix or RFC 3339 system time "
                                                   "(default: the block before the last change)"),
             to: str | None = Query(None, max_length=100, description="the same (default: the head)"),
             from_as_of: str | None = Query(None, max_length=100,
                                            description="RFC 3339 event time the from version is read as of"),
             to_as_of: str | None = Query(None, max_length=100,
                                          description="RFC 3339 event time the to version is read as of"),
             limit: int | None = Query(None, ge=1, description="rows at most (default 1000, up to "
                                                               "serve.sqlMaxRows)")) -> Response:
        from ..query.diff import API_NAMES, document, event_time
        from ..query.diff import diff as rows_changed

        # bounded as /api/sql's answers are: at most a limit of rows and serve.sqlMaxBytes of them
        rows = min(1000, settings.sql_max_rows) if limit is None else limit
        if rows > settings.sql_max_rows:
            raise Invalid(f"limit: at most {settings.sql_max_rows} rows (the service's serve.sqlMaxRows)")
        found = rows_changed(_existing(ws, dataset_id), from_, to,
                             event_time(from_as_of, API_NAMES.old_as_of),
                             event_time(to_as_of, API_NAMES.new_as_of), limit=rows + 1,
                             named=API_NAMES)
        return _ok(document(found, rows, settings.sql_max_bytes))

    @app.get("/api/datasets/{dataset_id}/schema",
             summary="The schema in force (column, type, nullability) and the newest slice's columns")
    def schema(dataset_id: str, history: bool = Query(
            False, description="also every version: block, system time, columns added")) -> dict:
        import pyarrow.parquet as pq

        from ..query.schema import dataset_schema, schema_json
        from ..trust.slice_check import checked_slices

        ds = _existing(ws, dataset_id)
        versions = schema_json(dataset_schema(ds), history)
        if ws.odf_of(dataset_id) is OdfVersion.V039:
            return {**_current_schema(ws, dataset_id), **versions}
        newest = next(((h, b) for h, b in ds.blocks() if b.output_slice is not None), None)
        files = checked_slices(ds, [newest] if newest else [])
        columns = [{"name": f.name, "type": str(f.type)} for f in pq.read_schema(files[0])] if files else []
        return {"dataset": dataset_id, "columns": columns, "vocab": to_dict(ds.state().vocab), **versions}

    @app.get("/api/datasets/{dataset_id}/lineage", summary="Datasets it is computed from / computed from it")
    async def lineage(dataset_id: str, direction: Direction = Direction.up,
                depth: int | None = Query(None, ge=1, le=1000),
                since: str | None = Query(None, max_length=40, description="RFC 3339 system time"),
                until: str | None = Query(None, max_length=40)) -> Response:
        from ..metadata.timestamps import parse_timestamp

        return _ok(await answers.lineage(validate_dataset_id(dataset_id), direction.value, depth,
                                         parse_timestamp(since) if since else None,
                                         parse_timestamp(until) if until else None))

    @app.get("/api/datasets/{dataset_id}/fields/{field}/lineage",
             summary="Where a column's values come from (backward) or go (forward), with the operations")
    def field_lineage(dataset_id: str, field: str, direction: FieldDirection = FieldDirection.backward,
                      depth: int | None = Query(None, ge=1, le=1000),
                      since: str | None = Query(None, max_length=40, description="RFC 3339 system time"),
                      until: str | None = Query(None, max_length=40)) -> dict:
        from ..lineage.fields import FieldGraph, column_lineage_json
        from ..metadata.timestamps import parse_timestamp

        ds = _existing(ws, dataset_id)
        fields = FieldGraph(ws, since=parse_timestamp(since) if since else None,
                            until=parse_timestamp(until) if until else None)
        return column_lineage_json(fields, ds.id, field, direction is FieldDirection.forward, depth)

    @app.get("/api/datasets/{dataset_id}/provenance",
             summary="The input records behind records of one block (replayed in the warm engine)")
    def provenance(dataset_id: str, block: str | None = Query(None, pattern="^[0-9a-fA-F]{4,69}$"),
                   row: Annotated[list[Annotated[int, Field(ge=0)]] | None, Query()] = None,
                   offset: Annotated[list[Annotated[int, Field(ge=0)]] | None, Query()] = None,
                   where: str | None = Query(None, min_length=1, max_length=10_000)) -> dict:
        from ..lineage.provenance import as_json, block_provenance, provenance_reads

        if row and where:
            raise Invalid("give row or where, not both")
        if offset and (row or where):
            raise Invalid("give offset alone, not with row or where")
        ds = _existing(ws, dataset_id)
        job = service.with_engine(lambda engine: block_provenance(ws, ds.id, block, engine, rows=row,
                                                                  offsets=offset, where=where),
                                  reads=provenance_reads(ws, ds.id))  # as the CLI's
        return as_json(job.result(timeout=PROVENANCE_MAX_SECONDS))

    @app.get("/lineage/{dataset_id}", response_class=HTMLResponse, include_in_schema=False)
    def lineage_page(dataset_id: str) -> HTMLResponse:
        from ..lineage.document import lineage_document
        from ..lineage.page import render_lineage_page

        ds = _existing(ws, dataset_id)
        return HTMLResponse(render_lineage_page(lineage_document(ws, ds.id, upstream=True,
                                                                 downstream=True)))

    settings = ws.config().serve
    # each query is a process holding up to a GB or so (Arrow's read-ahead, DuckDB's memory)
    running = threading.BoundedSemaphore(settings.sql_concurrency)

    def answer_sql(request: SqlRequest) -> Response:
        from ..query.bounded import Bounds, bounded_query

        limit = min(1000, settings.sql_max_rows) if request.limit is None else request.limit
        seconds = min(10.0, settings.sql_timeout_s) if request.timeout_s is None else request.timeout_s
        if limit > settings.sql_max_rows:
            raise Invalid(f"limit: at most {settings.sql_max_rows} rows (the service's serve.sqlMaxRows)")
        if seconds > settings.sql_timeout_s:
            raise Invalid(f"timeout_s: at most {settings.sql_timeout_s:g} (the service's serve.sqlTimeout)")
        if not running.acquire(blocking=False):
            raise TooManyQueries(f"{settings.sql_concurrency} queries are running (serve.sqlConcurrency); "
                                 "try again when one has ended")
        try:
            return _ok(bounded_query(ws.root, request.q, Bounds(limit, settings.sql_max_bytes, seconds,
                                                                  settings.sql_memory),
                                     request.as_at, request.as_of, request.receipt))
        finally:
            running.release()

    @app.get("/api/sql", summary="One read-only query over the datasets (DuckDB SQL), bounded in "
                                 "time, rows and bytes")
    def sql(request: Annotated[SqlRequest, Query()]) -> Response:
        return answer_sql(request)

    @app.post("/api/sql", summary="The same, the query in a JSON body (for one too long for a URL)")
    def sql_posted(request: SqlRequest) -> Response:
        return answer_sql(request)

    @app.get("/api/graph", summary="The whole workspace's dependency graph")
    async def graph() -> Response:
        return _ok(await answers.graph())

    @app.post("/api/datasets/{dataset_id}/pull", status_code=202, response_model=None,
              summary="Put a dataset in the build queue (needs --allow-writes)")
    def pull(dataset_id: str) -> dict | JSONResponse:
        if not access.allow_writes:
            return _error(403, smart.READ_ONLY)
        ds = _existing(ws, dataset_id)
        if not service.request(ds.id):
            raise Conflict(f"{ds.id} is pulled from a repository; the service does not update it")
        return {"queued": [ds.id]}

    @app.post("/api/datasets/{dataset_id}/ingest", response_model=None,
              summary="Push the body's records into a 0.39 root through a push source "
                      "(needs --allow-writes)")
    async def ingest(dataset_id: str, request: Request,
                     source_name: str | None = Query(None, alias="sourceName", max_length=200),
                     ) -> dict | JSONResponse:
        if not access.allow_writes:
            return _error(403, "this service is read-only (start it with --allow-writes)")
        from ..ingest.push import PushedInput, UnsupportedFormat, format_of_media_type, push
        from ..metadata.timestamps import parse_timestamp
        from ..workspace.runs import run_folder

        validate_dataset_id(dataset_id)
        if ws.odf_of(dataset_id) is None:
            raise DatasetNotFound(dataset_id)
        given = request.headers.get("content-type")
        try:
            fmt = format_of_media_type(given) if given else None
        except UnsupportedFormat as e:
            return _error(415, str(e))
        header = request.headers.get("odf-event-time")
        when = parse_timestamp(header) if header else None
        with run_folder(ws.run_dir, f"upload-{dataset_id}") as scratch:
            body = scratch / "body"
            with open(body, "wb") as out:  # at most MAX_INGEST_BODY bytes (the guard)
                async for chunk in request.stream():
                    out.write(chunk)
            pushed = service.push(dataset_id, lambda engine: push(
                ws, dataset_id, [PushedInput(body, "the request's body")], source_name=source_name,
                input_format=fmt, event_time=when, engine=engine))
            result = await asyncio.wrap_future(pushed)
        return {"dataset": dataset_id, "blocks": [b.hex() for b in result.blocks],
                "records": result.num_records, "message": result.message}

    @app.get("/api/events", summary="Server-sent events: commit and state of datasets, as they happen")
    async def events(request: Request) -> StreamingResponse:
        queue, missed = bus.subscribe(_last_event_id(request.headers.get("last-event-id", "")))

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n"
                for old in missed:
                    yield _sse(old.id, old.kind, old.data)
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                    except TimeoutError:
                        yield ": still here\n\n"  # keeps proxies from closing an idle stream
                        continue
                    if event is None:  # the service is stopping
                        return
                    yield _sse(event.id, event.kind, event.data)
            finally:
                bus.unsubscribe(queue)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    transfer.add_routes(app, ws)  # /{dataset}/refs/head...: the datasets for coord pull http://
    smart.add_routes(app, ws, access.allow_writes)  # /{dataset}/pull, /push: odf+http://
    return _Guard(app, access)


def _current_chain(ws: Workspace, name: str, offset: int, limit: int) -> dict:
    """``/chain`` of a current-ODF dataset: its blocks newest first, each named by its
    multihash, with its sequence number, signer and authorship as ``coord log`` shows them."""
    from ..store.dataset import CurrentDataset
    from ..store.signatures import signed_blocks, signers_newest_first

    ds = CurrentDataset(ws, name)
    newest_first = list(reversed(ds.state().blocks))
    signed = signed_blocks(ws, ds.root, newest_first, ws.checked_blocks(name).signatures)
    signers = signers_newest_first(ws, name, signed)[offset:offset + limit]
    return {"dataset": name, "odf": "0.39", "total": len(newest_first), "offset": offset,
            "limit": limit,
            "blocks": [{"hash": str(b.stored.hash), "sequenceNumber": b.stored.block.sequence_number,
                        "signer": s.key.hex() if s.key else None,
                        "authorship": "invalid signature" if b.invalid else s.status.value,
                        "block": to_dict(b.stored.block)}
                       for b, s in zip(signed[offset:offset + limit], signers, strict=True)]}


def _current_schema(ws: Workspace, name: str) -> dict:
    """``/schema`` of a current-ODF dataset: the newest slice's columns (the stored table:
    offset, op, system_time, event time, data) and the vocabulary in force."""
    import pyarrow.parquet as pq

    from ..store.checked import checked_current_files
    from ..store.dataset import CurrentDataset

    ds = CurrentDataset(ws, name)
    state = ds.state()
    files = checked_current_files(ds, state.slices[-1:])
    columns = [{"name": f.name, "type": str(f.type)} for f in pq.read_schema(files[0])] if files else []
    return {"dataset": name, "odf": "0.39", "columns": columns,
            "vocab": to_dict(state.vocab) if state.vocab is not None else {}}


def _existing(ws: Workspace, dataset_id: str) -> Dataset:
    ds = ws.dataset(validate_dataset_id(dataset_id))
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    return ds


MAX_EVENT_ID_DIGITS = 18  # event ids count up from 1 in one process: far below this


def _last_event_id(header: str) -> int | None:
    """The id in a ``Last-Event-ID`` header (None when empty): ASCII digits only, as this
    service writes them (``str.isdigit`` also takes '²' and '٣', which ``int`` may refuse)."""
    if not header:
        return None
    if not (header.isascii() and header.isdigit() and len(header) <= MAX_EVENT_ID_DIGITS):
        raise Invalid(f"Last-Event-ID {header[:40]!r}: expected the id of an event this service "
                      "sent (a number), or no header")
    return int(header)


def _ok(body: bytes) -> Response:
    return Response(content=body, media_type="application/json")


def _sse(event_id: int, kind: str, data: dict) -> str:
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(data)}\n\n"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


STATUS_OF: dict[type[CoordError], int] = {NotFound: 404, Conflict: 409, Invalid: 400, Unavailable: 503,
                                         CoordError: 400}


def status_of(error: CoordError) -> int:
    """The HTTP status of a refusal, by its category (``errors.py``)."""
    return STATUS_OF[category(error)]


def _errors(app: FastAPI, root: str) -> None:
    """Every failure as JSON: a ``CoordError`` with its category's status, a bare 500 (ours).
    Where the workspace lies is not a client's business: its folder is named ``<workspace>``."""

    def hidden(message: str) -> str:
        return message.replace(root, "<workspace>")

    @app.exception_handler(CoordError)
    async def refused(request: Request, exc: CoordError) -> JSONResponse:
        return _error(status_of(exc), hidden(str(exc)))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{' '.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                             for e in exc.errors())
        return _error(422, problems)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        import traceback

        message = _internal_error(exc)
        # the traceback to the service's log, never to the client
        print(f"coord serve: {request.method} {request.url.path}: {message}", file=sys.stderr, flush=True)
        traceback.print_exception(exc)
        return _error(500, hidden(message))


def _internal_error(exc: BaseException) -> str:
    """A bug's one line for the client: the exception's type and the first line of its
    message (bounded), which the service's log holds in full with the traceback."""
    first = next(iter(str(exc).splitlines()), "")[:200]
    return f"internal error: {type(exc).__name__}{': ' + first if first else ''} (see the service's log)"


class _Guard:
    """The access rules of the module docstring, in front of every route."""

    def __init__(self, app: Asgi, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._refusal(scope, headers)
        if problem is not None:
            await problem(scope, receive, send)
            return
        token = self.access.token
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if token is not None and scope["type"] == "http" and scope["path"] == "/" \
                and _same(query.get("token", [""])[0], token):
            # the page's own requests (and EventSource, which cannot send headers) use a cookie
            redirect = RedirectResponse("/", status_code=303)
            redirect.set_cookie(COOKIE, token, httponly=True, samesite="strict")
            await redirect(scope, receive, send)
            return
        limit = _body_limit(scope)
        if limit is not None:
            bounded = _BoundedBody(scope, receive, send, limit)
            receive, send = bounded.receive, bounded.send
        try:
            await self.app(scope, receive, send)
        except Exception:
            pass  # answered and logged by the handler of ``_errors``; Starlette raises it again,
            # which would have the server log a second traceback

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> JSONResponse | None:
        token = self.access.token
        if token is None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in LOOPBACK_HOSTS:
                return _error(421, f"host {host!r} is not this service's loopback address")
        else:
            given = headers.get("authorization", "")
            bearer = given[7:] if given.lower().startswith("bearer ") else ""
            cookie = SimpleCookie(headers.get("cookie", ""))
            from_cookie = cookie[COOKIE].value if COOKIE in cookie else ""
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            from_query = query.get("token", [""])[0] if scope["path"] == "/" else ""
            if not any(_same(t, token) for t in (bearer, from_cookie, from_query)):
                response = _error(401, "a bearer token is required (Authorization: Bearer TOKEN)")
                response.headers["www-authenticate"] = "Bearer"
                return response
        reads = scope.get("method", "GET") in ("GET", "HEAD", "OPTIONS")  # a WebSocket has none
        if not reads:
            lengths = [v for k, v in scope["headers"] if k.lower() == b"content-length"]
            chunked = "transfer-encoding" in headers
            if lengths and chunked or len(lengths) > 1:
                return _error(400, "a request gives its body's length once: one Content-Length "
                                   "or Transfer-Encoding: chunked, not both")
            length = headers.get("content-length", "")
            if not chunked and not length.isdigit():
                return _error(411, "a request with a body must give its Content-Length (or come chunked)")
            limit = _body_limit(scope)
            if limit is not None and not chunked and int(length) > limit:
                return _error(413, _too_large(limit))
        if scope["path"].startswith("/api/") or not reads or scope["type"] == "websocket":
            sender = _other_site(headers)
            if sender is not None:
                return _error(403, f"a request from {sender} is refused: the API answers this "
                                   "service's own pages and programs, not other web pages")
        return None


def _body_limit(scope: Scope) -> int | None:
    """The bytes a request's body may hold; None for a push's object upload (bounded by the
    size the push announced, ``smart.py``) and a request that has no body."""
    if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS") \
            or _UPLOAD.fullmatch(scope["path"]):
        return None
    return MAX_INGEST_BODY if scope["path"].endswith("/ingest") else MAX_BODY


def _too_large(limit: int) -> str:
    return f"a request's body may hold {limit} bytes at most"


class _BoundedBody:
    """A request's ``receive`` and ``send`` that count its body's bytes as they arrive: at the
    first past ``limit`` the request is answered 413 (unless its answer has begun) and the
    route sees the client gone, so nothing more is read; whatever the route answers then
    is dropped."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, limit: int):
        self._scope, self._receive, self._send, self._limit = scope, receive, send, limit
        self._received, self._refused, self._started = 0, False, False

    async def receive(self) -> MutableMapping[str, Any]:
        if self._refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._limit:
                self._refused = True
                if not self._started:
                    response = _error(413, _too_large(self._limit))
                    response.headers["connection"] = "close"  # the rest of the body is not read
                    await response(self._scope, self._receive, self._send)
                return {"type": "http.disconnect"}
        return message

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if not self._refused:
            self._started = True
            await self._send(message)


def _other_site(headers: dict[str, str]) -> str | None:
    """Who sent a browser request from a page of another origin, if one did: its ``Origin``
    (sent on fetches and form posts), else ``Sec-Fetch-Site`` (sent on every request, even
    an image's, by current browsers; "same-site" is another port or subdomain)."""
    origin = headers.get("origin")
    if origin is not None and _netloc(origin) != headers.get("host"):
        return origin[:200]
    site = headers.get("sec-fetch-site")
    if site in ("cross-site", "same-site"):
        return f"a page of another {'site' if site == 'cross-site' else 'origin'}"
    return None


def _netloc(url: str) -> str | None:
    try:
        return urlsplit(url).netloc
    except ValueError:  # e.g. an unclosed IPv6 bracket: no origin this service has
        return None


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())
