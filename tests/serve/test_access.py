"""Who may use a running ``coord serve``: loopback by default, a bearer token on any other
address, writes only with ``--allow-writes``."""
from __future__ import annotations

import http.server
import os
import threading

import httpx
import pytest

from coordinator.workspace import Workspace

from ..support.cli import coord
from .conftest import add_root, serving

TOKEN = "s3cret-token-for-the-tests-0123456789"


@pytest.fixture
def token_file(home):
    path = home / "token"
    path.write_text(TOKEN + "\n")
    os.chmod(path, 0o600)
    return path


def test_an_address_other_than_loopback_needs_a_token_file(home):
    result = coord("serve", "--bind", "0.0.0.0", "--port", "0", cwd=home, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "coord: error: --bind 0.0.0.0 is reachable from other machines: give --token-file "
        "(every request must then carry that token)"]


def test_a_token_file_others_can_read_is_refused(home, token_file):
    os.chmod(token_file, 0o644)
    result = coord("serve", "--port", "0", "--token-file", str(token_file), cwd=home, check=False)
    assert result.returncode == 1 and f"chmod 600 {token_file}" in result.stderr


def test_with_a_token_every_request_without_it_gets_401(home, token_file):
    add_root(home, "t.people", "people")
    with serving(home, "--bind", "0.0.0.0", "--token-file", str(token_file)) as served:
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        for path in ("/api/datasets", "/api/datasets/t.people/tail", "/api/events", "/docs",
                     "/openapi.json", "/"):
            assert httpx.get(url + path).status_code == 401, path
        wrong = httpx.get(url + "/api/datasets", headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401 and wrong.json()["error"].startswith("a bearer token is required")
        right = httpx.get(url + "/api/datasets", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and right.json()[0]["id"] == "t.people"


def test_the_page_opened_with_the_token_keeps_it_in_a_cookie(home, token_file):
    with serving(home, "--bind", "0.0.0.0", "--token-file", str(token_file)) as served:
        with httpx.Client(base_url=served.url.replace("0.0.0.0", "127.0.0.1"),
                          follow_redirects=True) as browser:
            assert browser.get("/", params={"token": TOKEN}).status_code == 200
            assert browser.get("/api/datasets").status_code == 200  # the cookie, no header


def test_on_loopback_a_foreign_host_name_is_refused(home):
    with serving(home) as served:
        assert served.get("/api/datasets").status_code == 200
        rebound = served.get("/api/datasets", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 421


def test_with_allow_writes_a_post_queues_a_pull(home):
    add_root(home, "t.people", "people")
    (home / "people" / "a.csv").write_text("id,name\n1,ann\n")
    with serving(home, "--allow-writes") as served:
        served.wait_for(lambda: served.dataset("t.people")["records"] == 1)
        (home / "people" / "b.csv").write_text("id,name\n2,bob\n")  # seen by the watcher too
        r = served.post("/api/datasets/t.people/pull")
        assert r.status_code == 202 and r.json() == {"queued": ["t.people"]}
        served.wait_for(lambda: served.dataset("t.people")["records"] == 2)
        assert served.post("/api/datasets/no.such/pull").status_code == 404


def test_a_post_from_another_origin_is_refused(home):
    add_root(home, "t.people", "people")
    with serving(home, "--allow-writes") as served:
        r = served.post("/api/datasets/t.people/pull", headers={"Origin": "https://attacker.example"})
        assert r.status_code == 403


@pytest.mark.parametrize("headers", [
    {"Origin": "https://attacker.example"},
    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},  # an <img src> sends no Origin
    {"Sec-Fetch-Site": "same-site"},  # a page served on another port of this host
])
def test_a_query_from_a_page_of_another_origin_is_refused(home, headers):
    add_root(home, "t.people", "people")
    (home / "people" / "a.csv").write_text("id,name\n1,ann\n")
    with serving(home) as served:
        served.wait_for(lambda: served.dataset("t.people")["records"] == 1)
        target = Workspace.open(home).dataset("t.people").data_files()[0]
        before = target.read_bytes()
        attack = f"EXPLAIN ANALYZE COPY (SELECT 42) TO '{target}' (FORMAT csv, USE_TMP_FILE false)"
        for r in (served.get("/api/sql", params={"q": attack}, headers=headers),
                  served.get("/api/sql", params={"q": "SELECT 1"}, headers=headers),
                  served.get("/api/datasets/t.people", headers=headers)):
            assert r.status_code == 403 and "is refused" in r.json()["error"], r.text
        assert target.read_bytes() == before


def test_the_services_own_pages_and_their_requests_are_answered(home):
    add_root(home, "t.people", "people")
    with serving(home) as served:
        own = {"Origin": served.url, "Sec-Fetch-Site": "same-origin"}
        linked = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}  # a link elsewhere
        assert served.get("/", headers=linked).status_code == 200
        assert served.get("/lineage/t.people", headers=linked).status_code == 200
        answer = served.get("/api/sql", params={"q": "SELECT 42 AS n"}, headers=own).json()
        assert answer["rows"] == [{"n": 42}]
        assert served.get("/api/datasets", headers=own).status_code == 200


def test_a_request_body_said_to_be_too_large_is_refused(home):
    with serving(home) as served:
        large = served.post("/api/sql", json={"q": "SELECT 1", "pad": "x" * (2 << 20)})
        assert large.status_code == 413 and "at most" in large.json()["error"]


class BlankPage(http.server.BaseHTTPRequestHandler):
    """Another origin: a page of its own, empty, on another port of the same host."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<!doctype html><title>elsewhere</title>")

    def log_message(self, *args) -> None:
        pass


def test_in_a_browser_the_page_works_and_a_page_of_another_origin_cannot_run_a_query(home, browser):
    """Real Chromium: the service's page loads its data; a page served on another port of the
    host sends a query in a frame and as a fetch, and both are refused (the browser sends no
    Origin with the frame, only Sec-Fetch-Site)."""
    add_root(home, "t.people", "people")
    (home / "people" / "a.csv").write_text("id,name\n1,ann\n")
    with serving(home) as served:
        served.wait_for(lambda: served.dataset("t.people")["records"] == 1)
        page = browser.new_page()
        page.goto(served.url + "/")
        page.wait_for_function("() => document.querySelector('tr[data-id=\"t.people\"] td.records')"
                               "?.textContent === '1'", timeout=30_000)
        query = served.url + "/api/sql?q=SELECT%2042"
        other = http.server.HTTPServer(("127.0.0.1", 0), BlankPage)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            seen: dict[str, int] = {}
            page.on("response", lambda r: seen.update({r.url: r.status}) if r.url.startswith(query) else None)
            page.goto(f"http://127.0.0.1:{other.server_address[1]}/")
            page.evaluate(f"""async () => {{
                await new Promise(done => {{ const f = document.createElement("iframe");
                                            f.onload = done; f.src = "{query}&via=frame";
                                            document.body.appendChild(f); }});
                await fetch("{query}&via=fetch", {{mode: "no-cors"}});
            }}""")
            for _ in range(100):  # the sync API delivers events only while it is called
                if len(seen) == 2:
                    break
                page.wait_for_timeout(100)
            assert seen == {f"{query}&via=frame": 403, f"{query}&via=fetch": 403}
        finally:
            other.shutdown()
            page.close()
