"""Current-ODF (0.39) datasets pulled from an HTTP repository: a folder repository that
``coord push`` wrote, served as is by a real static web server (python's http.server on
loopback), read with the same bounds and hash checks as a folder or a bucket, read-only.
Over HTTPS (the same server behind TLS, with a certificate made for the test) the pull
trusts what OpenSSL trusts (``SSL_CERT_FILE``) and refuses any other certificate."""
from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coordinator.repository import fileio
from coordinator.repository.fileio import HttpError, HttpFileIO
from coordinator.store import layout
from coordinator.store.dataset import CurrentDataset, new_dataset_key
from coordinator.store.verify import verify_folder
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.odf39_datasets import write_root
from ..support.tamper import flip_a_byte
from .conftest import make_root, with_repo
from .test_current_odf import THIRD, add_batch, current_ws, files_of, records


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *_) -> None:
        pass


def serve_folder(folder: Path, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """``folder`` served by http.server on a free loopback port, in a thread (behind ``tls``
    when given): its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(folder)))
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def origin(tmp_path) -> Workspace:
    """A workspace holding ``cities`` (current ODF, 5 signed blocks), pushed to ``tmp_path/repo``."""
    ws = current_ws(tmp_path / "origin")
    ds = CurrentDataset(ws, "cities")
    write_root(ds.root, ds.lock_path.parent, tmp_path / "scratch", key=new_dataset_key(),
               signer=ws.signing_key)
    coord("push", "cities", "--to", "shared", cwd=with_repo(ws, (tmp_path / "repo").as_uri()).root)
    return ws


@pytest.fixture
def other(tmp_path) -> Workspace:
    return current_ws(tmp_path / "other")


@pytest.fixture
def web(tmp_path) -> Iterator[str]:
    """The folder repository ``origin`` pushes to, served over HTTP: its URL."""
    (tmp_path / "repo").mkdir(exist_ok=True)
    yield from serve_folder(tmp_path / "repo")


def failed_pull(other: Workspace, *args: str) -> str:
    """The one line a refused ``coord pull ARGS`` prints about it."""
    done = coord("pull", *args, cwd=other.root, check=False)
    assert done.returncode == 1
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "failed" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    return lines[0]


def test_a_pushed_dataset_is_pulled_by_its_url_and_verifies(origin, other, web):
    out = coord("pull", f"{web}/cities", "--as", "towns", cwd=other.root).stdout
    assert "towns: new dataset: pulling 5 blocks" in out
    towns = CurrentDataset(other, "towns")
    assert verify_folder(towns.root) == []
    assert coord("verify", "towns", cwd=other.root).returncode == 0
    assert records(other, "towns") == records(origin, "cities")
    mine = {k: v for k, v in files_of(towns.root).items() if k != layout.ALIAS}
    assert mine == {k: v for k, v in files_of(CurrentDataset(origin, "cities").root).items()
                    if k != layout.ALIAS}


def test_a_dataset_pulled_by_url_is_pulled_again_from_there_by_its_name(origin, other, web, tmp_path):
    coord("pull", f"{web}/cities", cwd=other.root)
    new_head = add_batch(origin, THIRD, 40, tmp_path / "more")
    coord("push", "cities", cwd=origin.root)
    assert "cities: local is 1 block behind; pulling" in coord("pull", "cities", cwd=other.root).stdout
    assert CurrentDataset(other, "cities").head() == new_head
    assert coord("pull", "cities", cwd=other.root).stdout.strip() == "cities: up to date"
    assert verify_folder(CurrentDataset(other, "cities").root) == []


def test_a_named_http_repository_is_pulled_from(origin, other, web):
    coord("repo", "add", "web", web, cwd=other.root)
    assert "cities: new dataset: pulling 5 blocks" in coord("pull", "web/cities", cwd=other.root).stdout
    assert records(other, "cities") == records(origin, "cities")


def test_a_tampered_block_is_refused_before_it_is_parsed(origin, other, web, tmp_path):
    head = CurrentDataset(origin, "cities").head()
    flip_a_byte(tmp_path / "repo" / "cities" / layout.block_file(head), at=40)
    line = failed_pull(other, f"{web}/cities")
    assert f"cities/blocks/{head}: block {head}: its bytes hash to" in line
    assert not CurrentDataset(other, "cities").root.exists()


def test_a_tampered_data_file_is_refused_and_nothing_installed(origin, other, web, tmp_path):
    first = CurrentDataset(origin, "cities").state().slices[0]
    flip_a_byte(tmp_path / "repo" / "cities" / layout.data_file(first.slice.physical_hash))
    line = failed_pull(other, f"{web}/cities")
    assert f"cities/data/{first.slice.physical_hash}: its bytes hash to f1620" in line
    assert not CurrentDataset(other, "cities").root.exists()


def test_a_data_file_longer_than_its_block_says_is_not_read_past_it(origin, other, web, tmp_path):
    first = CurrentDataset(origin, "cities").state().slices[0]
    with open(tmp_path / "repo" / "cities" / layout.data_file(first.slice.physical_hash), "ab") as f:
        f.write(b"x" * 1000)
    assert f"larger than the {first.slice.size} bytes the block records" in failed_pull(
        other, f"{web}/cities")


def test_a_dataset_the_server_does_not_have_is_named_in_one_line(origin, other, web):
    line = failed_pull(other, f"{web}/villages")
    assert f"{web}/villages: no dataset there" in line


def test_a_refused_connection_is_one_line(other):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = failed_pull(other, f"http://127.0.0.1:{port}/cities")
    assert f"http://127.0.0.1:{port}/cities/refs/head: Connection refused" in line


def test_a_server_that_never_answers_is_given_up_on(monkeypatch):
    monkeypatch.setattr(fileio, "HTTP_TIMEOUT_S", 0.3)
    with socket.socket() as s:  # listens (the kernel accepts the connection) but never answers
        s.bind(("127.0.0.1", 0))
        s.listen()
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(HttpError, match=r"refs/head: no answer within 0.3 s"):
            HttpFileIO(url).read_bytes("cities/refs/head", 100)


class _Misbehaving(SimpleHTTPRequestHandler):
    """Answers every GET with 200 and ``body``, or after ``stall`` bytes of it goes silent."""

    body = b"f1620" + b"0" * 64
    headers_sent: dict[str, str] = {}
    stall: int | None = None

    def do_GET(self) -> None:
        self.send_response(200)
        for name, value in self.headers_sent.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if self.stall is None:
            self.wfile.write(self.body)
        else:
            self.wfile.write(self.body[:self.stall])
            self.wfile.flush()
            threading.Event().wait(2)  # longer than the client waits

    def log_message(self, *_) -> None:
        pass


def misbehaving(**attributes) -> Iterator[str]:
    handler = type("Handler", (_Misbehaving,), attributes)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_body_the_server_encodes_anyway_is_refused():
    for url in misbehaving(headers_sent={"Content-Encoding": "gzip"}):
        with pytest.raises(HttpError, match=r"cities/refs/head: the server sent it gzip-encoded"):
            HttpFileIO(url).read_bytes("cities/refs/head", 100)


def test_a_body_that_stops_midway_is_given_up_on(monkeypatch):
    monkeypatch.setattr(fileio, "HTTP_TIMEOUT_S", 0.3)
    for url in misbehaving(body=b"x" * 1000, stall=10):
        with pytest.raises(HttpError, match=r"cities/data/x: the server sent nothing for 0.3 s"):
            HttpFileIO(url).read_bytes("cities/data/x", 1000)


def test_a_pull_killed_midway_keeps_the_previous_head_and_the_next_one_finishes(
        origin, other, web, tmp_path):
    coord("pull", f"{web}/cities", cwd=other.root)
    before = CurrentDataset(other, "cities").head()
    add_batch(origin, THIRD, 40, tmp_path / "more")
    coord("push", "cities", cwd=origin.root)
    killed = coord("pull", "cities", cwd=other.root, env={"COORD_CRASH_AT": "odf-block-written"},
                   check=False)
    assert killed.returncode != 0
    assert CurrentDataset(other, "cities").head() == before
    assert verify_folder(CurrentDataset(other, "cities").root) == []
    assert "local is 1 block behind" in coord("pull", "cities", cwd=other.root).stdout
    assert files_of(CurrentDataset(other, "cities").root) == files_of(CurrentDataset(origin, "cities").root)


def test_pushing_to_an_http_repository_is_refused(origin, web):
    coord("repo", "add", "web", web, cwd=origin.root)
    done = coord("push", "cities", "--to", "web", cwd=origin.root, check=False)
    assert done.returncode != 0
    assert f"web/cities: {web} is read-only (an HTTP repository)" in done.stderr


def test_an_odf18_dataset_over_http_is_refused_in_one_line(origin, other, web):
    make_root(origin, "events")  # ODF 0.18: its checkpoint folders would have to be listed
    coord("push", "events", "--to", "shared", cwd=origin.root)
    line = failed_pull(other, f"{web}/events")
    assert "a web server lists no folders, so only current-ODF (0.39) datasets can be pulled" in line


def test_a_dataset_in_a_folder_is_pulled_by_its_file_url(origin, other, tmp_path):
    url = f"{(tmp_path / 'repo').as_uri()}/cities"
    assert "cities: new dataset: pulling 5 blocks" in coord("pull", url, cwd=other.root).stdout
    assert verify_folder(CurrentDataset(other, "cities").root) == []


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key: (certificate, key) PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def secure_web(tmp_path) -> Iterator[tuple[str, Path]]:
    """The folder repository ``origin`` pushes to, served over HTTPS: its URL and certificate."""
    cert_file, key_file = self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    for url in serve_folder(tmp_path / "repo", tls):
        yield url, cert_file


def test_a_dataset_is_pulled_over_https_when_its_certificate_is_trusted(origin, other, secure_web):
    url, cert_file = secure_web
    out = coord("pull", f"{url}/cities", "--as", "towns", cwd=other.root,
                env={"SSL_CERT_FILE": str(cert_file)}).stdout
    assert "towns: new dataset: pulling 5 blocks" in out
    assert verify_folder(CurrentDataset(other, "towns").root) == []


def test_an_untrusted_certificate_is_refused_in_one_line(origin, other, secure_web):
    url, _ = secure_web
    done = coord("pull", f"{url}/cities", "--as", "towns", cwd=other.root, check=False)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line == (f"coord: error: towns: {url}/cities/refs/head: the server's TLS certificate is not "
                    "trusted (self-signed certificate): add its issuer to the CA bundle SSL_CERT_FILE names")
    assert not (other.root / ".coord" / "datasets" / "towns").exists()
