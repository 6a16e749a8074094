"""What a hostile client of ``/api/sql`` cannot do to a running ``coord serve``: take memory
without bound (a query's process is bounded by ``serve.sqlMemory``), pass a body past the
request bound (counted as it arrives, however it is framed), learn where the machine keeps
the user's home or the workspace (DuckDB's settings), or have a value DuckDB returns break
the answer (nested values, infinite timestamps, NaN: a 200 with valid JSON)."""
from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from coordinator.serve.api import MAX_BODY, Access, _Guard

from .conftest import Served, add_root, drop_csv, init_workspace, serving

PEOPLE = "t.people"
SQL_MEMORY_MIB = 256


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    home = init_workspace(tmp_path_factory.mktemp("ws"),
                          f"serve: {{poll: 1h, retryMax: 1s, sqlMemory: {SQL_MEMORY_MIB}MiB}}\n")
    add_root(home, PEOPLE, "people")
    drop_csv(home / "people", "a.csv", [(1, "ann"), (2, "bob")])
    with serving(home) as s:
        s.wait_for(lambda: s.dataset(PEOPLE)["records"] == 2, what="the file ingested")
        yield s


def raw_request(served: Served, head: str, body_chunks: list[bytes]) -> tuple[int, str]:
    """Send a request's head and then its body's chunks on a plain socket, and read the answer
    until the service closes the connection, without sending anything more: the answer's
    status and body."""
    where = urlsplit(served.url)
    with socket.create_connection((where.hostname, where.port), timeout=60) as conn:
        conn.sendall(head.replace("\n", "\r\n").encode())
        try:
            for chunk in body_chunks:
                conn.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before the rest was sent
        answer = b""
        while got := conn.recv(65536):
            answer += got
    status_line = answer.split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), answer.split(b"\r\n\r\n", 1)[1].decode()


def head_of(served: Served, *headers: str) -> str:
    host = urlsplit(served.url).netloc
    return "\n".join(["POST /api/sql HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
                      "Connection: close",
                      *headers, ""]) + "\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_query_needing_more_memory_than_the_bound_is_a_400_and_the_service_answers_on(served):
    r = served.get("/api/sql", params={"q": "SELECT list(range) AS l FROM range(30000000)", "timeout_s": 30})
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(f"the query needed more than the {SQL_MEMORY_MIB} MiB of memory")
    assert served.get("/api/sql", params={"q": f'SELECT count(*) AS n FROM "{PEOPLE}"'}).json()["rows"] == [
        {"n": 2}]


def test_a_body_with_both_a_length_and_chunks_is_a_400(served):
    body = json.dumps({"q": "SELECT 1 AS one"}).encode()
    status, answer = raw_request(served, head_of(served, "Content-Length: 16", "Transfer-Encoding: chunked"),
                                 [chunk(body), b"0\r\n\r\n"])
    assert status == 400, answer


def test_a_chunked_body_within_the_bound_is_answered(served):
    body = json.dumps({"q": "SELECT 1 AS one"}).encode()
    status, answer = raw_request(served, head_of(served, "Transfer-Encoding: chunked"),
                                 [chunk(body), b"0\r\n\r\n"])
    assert status == 200 and json.loads(answer)["rows"] == [{"one": 1}], answer


def test_a_chunked_body_past_the_bound_is_a_413_at_the_first_byte_past_it(served):
    """The body is sent up to one byte past the bound and never ended: the answer comes at
    that byte, not at the body's end (and the service has read nothing more)."""
    body = b'{"q": "SELECT 1"' + b" " * (MAX_BODY - 16)
    chunks = [chunk(body[at:at + (64 << 10)]) for at in range(0, len(body), 64 << 10)]
    status, answer = raw_request(served, head_of(served, "Transfer-Encoding: chunked"),
                                 [*chunks, chunk(b" ")])
    assert status == 413 and "at most" in json.loads(answer)["error"]
    assert served.get("/api/sql", params={"q": "SELECT 2 AS two"}).json()["rows"] == [{"two": 2}]


def test_a_body_neither_chunked_nor_of_a_given_length_is_a_411(served):
    status, answer = raw_request(served, head_of(served), [])
    assert status == 411 and "Content-Length" in json.loads(answer)["error"]


async def echo(scope, receive, send) -> None:
    """The app behind the guard: reads the whole body and answers its length."""
    size, more = 0, True
    while more:
        message = await receive()
        size, more = size + len(message.get("body", b"")), message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


def guarded_post(headers: dict[str, str]) -> httpx.Response:
    """A POST through the service's guard as an HTTP server that does not refuse these headers
    itself would hand it over (uvicorn's h11 does; its httptools may not)."""
    guard = _Guard(echo, Access(token=None, allow_writes=False))

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard),
                                     base_url="http://127.0.0.1") as client:
            request = client.build_request("POST", "/api/sql", content=b"{}")
            request.headers.update(headers)
            return await client.send(request)

    return asyncio.run(post())


def test_the_guard_refuses_a_body_with_both_a_length_and_chunks(served):
    r = guarded_post({"Content-Length": "2", "Transfer-Encoding": "chunked"})
    assert r.status_code == 400 and "not both" in r.json()["error"]


def test_the_guard_answers_a_body_given_its_length_once(served):
    assert guarded_post({"Content-Length": "2"}).text == "2"


def test_no_duckdb_setting_names_the_home_folder_or_the_workspace(served):
    r = served.get("/api/sql", params={"q": "SELECT name, value FROM duckdb_settings()", "limit": 10_000})
    values = [str(row["value"]) for row in r.json()["rows"]]
    assert len(values) > 100
    assert not [v for v in values if str(Path.home()) in v or str(served.home) in v]


def test_an_error_of_duckdb_s_extension_list_names_no_home_folder(served):
    r = served.get("/api/sql", params={"q": "SELECT * FROM duckdb_extensions()"})
    assert str(Path.home()) not in r.text and str(served.home) not in r.text


def test_sql_answers_nested_values_infinite_timestamps_and_non_finite_floats_as_json(served):
    r = served.get("/api/sql", params={"q": "SELECT [1, 2] AS l, {'a': 1} AS s, TIMESTAMP 'infinity' AS t, "
                                            "DATE '-infinity' AS d, 'nan'::DOUBLE AS n, INTERVAL 3 DAY AS i"})
    assert r.status_code == 200, r.text
    assert json.loads(r.text, parse_constant=lambda name: pytest.fail(f"not JSON: {name}"))["rows"] == [
        {"l": [1, 2], "s": {"a": 1}, "t": "infinity", "d": "-infinity", "n": "nan", "i": "P0M3DT0S"}]
