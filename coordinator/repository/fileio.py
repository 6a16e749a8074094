"""FileIO: the few operations sync needs from a repository's storage, over pyarrow filesystems.

Paths are relative to the repository root and ``/``-separated. Data moves through pyarrow
streams (the local filesystem or ``S3FileSystem``); the one operation pyarrow cannot do, the
compare-and-swap of a ref, is a lock file (there only while the swap runs) plus atomic rename
locally and an S3 conditional write (``If-None-Match: *`` to create, ``If-Match: <etag>`` to
replace) on S3.

URLs: ``file:///path``, ``s3://bucket/prefix`` (AWS) and ``s3+http://host:port/bucket/prefix``
or ``s3+https://...`` (an S3-compatible store at that endpoint). Credentials come from the
usual AWS environment variables and profiles. ``http(s)://host/path`` is a repository folder
a static web server (or a bucket's public URL) serves, read-only.

Reading a folder repository opens regular files only: a named pipe would block the reader
forever, a device could have side effects, a folder is no object. Each path is checked with
``stat`` before it is opened (so a device is never opened), then opened with ``O_NONBLOCK``
(opening a pipe cannot wait for a writer) and ``O_NOFOLLOW``, and checked again on the open
descriptor; anything else is ``WrongKind``, named in one line (as is a file where a folder
of the repository should be). Symbolic links are followed while they stay inside the
repository folder (``OutsideRepository`` otherwise): a folder repository may be assembled
from links. A regular local file cannot block a read; S3 reads
end on the SDKs' connect and stall timeouts. On S3, a "folder" (a key that only prefixes
others, or a ``name/`` marker) in place of an object is ``WrongKind`` too.

HTTP(S) repositories are read with GET (and HEAD), under the same bounds as the others: the
callers hash what they read before they parse it, so nothing trusts the server. A 404 (or 410)
is an absent object; any other answer but 200, a refused connection, an unknown host is an
``HttpError`` naming the URL in one line. Bodies come as stored (``Accept-Encoding: identity``;
one the server encodes anyway is refused). Connecting, and each read of a body, ends after
``HTTP_TIMEOUT_S`` seconds of silence. A web server lists no folders and takes no writes: a
listing (only ODF 0.18's checkpoint folders need one) and every write are ``ReadOnlyRepository``,
and push refuses such a repository before it reads anything (``FileIO.read_only``). When
``COORD_TOKEN`` is set, a request carries it as ``Authorization: Bearer`` (a ``coord serve
--token-file`` answers nothing without it), as the smart protocol's client sends it, but only
to the origin (scheme, host and port) of the URL the user named: a URL elsewhere gets no token.
A redirect is followed only to an http(s) URL of the same origin (``http_opener``), so the
token never follows one elsewhere; any other is an ``HttpError`` naming where it led.
"""
from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlparse, urlsplit

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from http.client import HTTPResponse

from ..errors import Conflict, CoordError, Invalid, Unavailable
from ..workspace.fsutil import atomic_write, install, tmp_name

CHUNK = 4 << 20  # stream copies move this many bytes at a time
_SMALL = 1 << 20  # S3 objects written from memory below this size: a single PutObject

OnBytes = Callable[[int], None]


class RepositoryURLError(Invalid, ValueError):
    pass


class RefConflict(Conflict):
    """The ref was not what the writer last read: someone else moved it."""


class OutsideRepository(CoordError):
    """A path in a folder repository leads (through a link) outside the folder."""


class WrongKind(CoordError):
    """A path in the repository names another kind of object than the reader needs (a named
    pipe, a device, a folder where it reads a file; a file where it needs a folder); it is
    not read."""

    def __init__(self, path: str, kind: str, expected: str = "file"):
        super().__init__(f"{path} is a {kind}, not a {expected}")
        self.path = path
        self.kind = kind


_KINDS = ((stat.S_ISREG, "file"), (stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "named pipe"),
          (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"),
          (stat.S_ISLNK, "symbolic link"))


def _kind(mode: int) -> str:
    return next((kind for is_kind, kind in _KINDS if is_kind(mode)), "special file")


def _refuse_unless_regular(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise WrongKind(path, _kind(mode))


class TooLarge(CoordError):
    """An object in the repository holds more bytes than the reader accepts; the rest is unread."""

    def __init__(self, path: str, limit: int):
        super().__init__(f"{path}: larger than {limit} bytes")
        self.path = path
        self.limit = limit


def _bounded(data: bytes, path: str, limit: int) -> bytes:
    """``data`` read as ``limit + 1`` bytes at most: refuse it when it reached past the limit."""
    if len(data) > limit:
        raise TooLarge(path, limit)
    return data


class FileIO(ABC):
    """A repository's storage. Writes become visible whole (never a half-written file)."""

    read_only = False  # True: it serves reads only (an HTTP repository); push refuses it

    def __init__(self, root: str):
        self.root = root.rstrip("/")

    def full_path(self, path: str) -> str:
        return f"{self.root}/{path}" if self.root else path

    # --- reading ----------------------------------------------------------------------------

    def read_bytes(self, path: str, limit: int) -> bytes | None:
        """The file's bytes (None when absent); TooLarge past ``limit`` bytes, which stay unread."""
        try:
            with self._open_input(path) as f:
                return _bounded(f.read(limit + 1), path, limit)
        except FileNotFoundError:
            self._refuse_folder(path)
            return None

    @abstractmethod
    def _refuse_folder(self, path: str) -> None:
        """(``path`` was not found as an object.) WrongKind when a folder stands in its place."""

    @abstractmethod
    def is_file(self, path: str) -> bool:
        """Whether ``path`` is a file (an object), without reading it."""

    @abstractmethod
    def list_files(self, prefix: str) -> dict[str, int]:
        """Every file under the folder ``prefix`` (recursively): relative path → size."""

    def get_file(
        self, path: str, local: Path, on_bytes: OnBytes, *, limit: int, digest: bool = False
    ) -> bytes | None:
        """Download ``path`` to ``local``; with ``digest`` return the SHA3-256 of the bytes read.

        Hashing while streaming saves a second pass over the file when the puller checks it.
        More than ``limit`` bytes (the size listed before, for a file that grew since) is
        TooLarge: the download stops there.
        """
        local.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha3_256() if digest else None
        read = 0
        with self._open_input(path) as src, open(local, "wb") as dst:
            while chunk := src.read(min(CHUNK, limit + 1 - read)):
                read += len(chunk)
                if read > limit:
                    raise TooLarge(path, limit)
                dst.write(chunk)
                if h is not None:
                    h.update(chunk)
                on_bytes(len(chunk))
        return h.digest() if h is not None else None

    # --- writing ----------------------------------------------------------------------------

    def put_file(self, local: Path, path: str, on_bytes: OnBytes) -> None:
        with open(local, "rb") as src, self._open_output(path) as dst:
            while chunk := src.read(CHUNK):
                dst.write(chunk)
                on_bytes(len(chunk))

    def write_bytes(self, path: str, data: bytes) -> None:
        with self._open_output(path) as dst:
            dst.write(data)

    @abstractmethod
    def _open_input(self, path: str):
        """A readable stream (context manager) of the file; FileNotFoundError when absent."""

    @abstractmethod
    def _open_output(self, path: str):
        """A writable stream (context manager); the file appears whole when it closes."""

    # --- refs -------------------------------------------------------------------------------

    @abstractmethod
    def read_ref(self, path: str, limit: int) -> tuple[bytes | None, object]:
        """The ref's content (None when absent; TooLarge past ``limit``) and a token for ``swap_ref``."""

    @abstractmethod
    def swap_ref(self, path: str, data: bytes, expected: object) -> None:
        """Write the ref only if it still matches ``expected`` (from ``read_ref``), else RefConflict."""


class ArrowFileIO(FileIO):
    """A repository on one of pyarrow's file systems."""

    def __init__(self, fs: pafs.FileSystem, root: str):
        super().__init__(root)
        self.fs = fs

    def _refuse_folder(self, path: str) -> None:
        # on S3, a key that only prefixes others, or a ``path/`` marker
        if self.fs.get_file_info(self.full_path(path)).type == pafs.FileType.Directory:
            raise WrongKind(path, "folder")

    def is_file(self, path: str) -> bool:
        return self.fs.get_file_info(self.full_path(path)).type == pafs.FileType.File

    def list_files(self, prefix: str) -> dict[str, int]:
        selector = pafs.FileSelector(self.full_path(prefix), recursive=True, allow_not_found=True)
        start = len(self.root) + 1 if self.root else 0
        return {
            info.path[start:]: info.size
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        }

    def _open_input(self, path: str):
        # compression=None: the bytes as stored (pyarrow would un-gzip a name ending in .gz)
        try:
            return self.fs.open_input_stream(self.full_path(path), compression=None)
        except IsADirectoryError:
            raise WrongKind(path, "folder") from None


class LocalFileIO(ArrowFileIO):
    """A repository in a local (or mounted) folder."""

    def __init__(self, root: Path):
        super().__init__(pafs.LocalFileSystem(), str(root))

    def _open_input(self, path: str):
        # A symbolic link in the folder must not make the reader copy a file from outside it
        # (a key, another user's data) into a dataset.
        real, root = os.path.realpath(self.full_path(path)), os.path.realpath(self.root)
        if os.path.commonpath([real, root]) != root:
            raise OutsideRepository(f"{path}: a link to {real}, outside the repository folder")
        try:
            _refuse_unless_regular(path, os.stat(real).st_mode)  # a device is not even opened
        except NotADirectoryError:
            raise self._not_a_folder(path.rpartition("/")[0]) from None
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            if e.errno == errno.ELOOP:  # replaced by a link since realpath
                raise WrongKind(path, "symbolic link") from None
            raise
        try:  # it may have been replaced since the stat
            _refuse_unless_regular(path, os.fstat(fd).st_mode)
        except WrongKind:
            os.close(fd)
            raise
        return os.fdopen(fd, "rb")  # O_NONBLOCK does not change reads of a regular file

    def list_files(self, prefix: str) -> dict[str, int]:
        try:
            return super().list_files(prefix)
        except NotADirectoryError:
            raise self._not_a_folder(prefix) from None

    def _not_a_folder(self, folder: str) -> Exception:
        """What to raise when a component of ``folder`` is not a folder: WrongKind naming the
        first one (else the error the system gives, should the folder have changed since)."""
        parts = folder.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            try:
                mode = os.stat(self.full_path(sub)).st_mode
            except OSError as e:
                return e
            if not stat.S_ISDIR(mode):
                return WrongKind(sub, _kind(mode), "folder")
        return NotADirectoryError(errno.ENOTDIR, "not a folder", self.full_path(folder))

    def _open_output(self, path: str):
        return _LocalOutput(Path(self.full_path(path)))

    def read_ref(self, path: str, limit: int) -> tuple[bytes | None, object]:
        data = self.read_bytes(path, limit)
        return data, data

    def swap_ref(self, path: str, data: bytes, expected: object) -> None:
        target = Path(self.full_path(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        # The lock serialises pushers on this machine or on a filesystem with working flock
        # (NFSv4, SMB); the rename makes the new ref appear whole to readers. The lock file
        # exists only while a swap runs: the repository keeps nothing but the reference's files.
        lock = target.with_name(target.name + ".lock")
        fd = _lock_file(lock)
        try:
            try:  # anything longer than the expected ref differs from it
                current = self.read_bytes(path, len(expected) if isinstance(expected, bytes) else 0)
            except TooLarge:
                raise RefConflict(path) from None
            if current != expected:
                raise RefConflict(path)
            atomic_write(target, data)
        finally:
            lock.unlink(missing_ok=True)  # still held: a waiter sees it gone and takes a new one
            os.close(fd)


def _lock_file(lock: Path) -> int:
    """A descriptor holding an exclusive ``flock`` on the file named ``lock`` (created if absent).
    The holder removes the file before it lets go, so a waiter may be granted the lock of a file
    no longer there: it checks that the name still leads to the file it locked, else tries again
    (otherwise it and one that created the file anew would both hold "the" lock)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                named = os.stat(lock)
            except FileNotFoundError:
                named = None
        except BaseException:
            os.close(fd)
            raise
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


class _LocalOutput:
    """Write under a temporary name, then fsync and rename into place (fsutil.install)."""

    def __init__(self, target: Path):
        self.target = target

    def __enter__(self):
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp_name(self.target.parent)
        self.stream = open(self.tmp, "wb")
        return self.stream

    def __exit__(self, exc_type, *_):
        self.stream.close()
        if exc_type is None:
            install(self.tmp, self.target)
        else:
            self.tmp.unlink(missing_ok=True)


@functools.cache
def s3_session():
    """The process's one boto3 session: it reads botocore's S3 model files once and resolves
    credentials once (0.1-0.2 s a session), however many repositories a command opens."""
    import boto3

    return boto3.session.Session()


@functools.cache
def http_opener():
    """The process's one urllib opener, with one TLS context: urlopen's default makes a context
    per HTTPS connection, loading the CA bundle each time (~50 ms of CPU a request)."""
    import ssl
    import urllib.error
    import urllib.request

    class SameOrigin(urllib.request.HTTPRedirectHandler):
        """Follows a redirect within the request's origin only: urllib's own follows one to any
        host (and to ftp://), with every header, ``Authorization`` too."""

        def redirect_request(self, req, fp, code, msg, headers, newurl):
            if origin(newurl) is None or origin(newurl) != origin(req.full_url):
                raise urllib.error.HTTPError(req.full_url, code, f"{msg}, redirected to {newurl[:200]}, "
                                             "another origin (scheme, host, port): not followed",
                                             headers, fp)
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context()),
                                       SameOrigin())


def origin(url: str) -> tuple[str, str, int] | None:
    """What a token is scoped to: an http(s) URL's scheme, host and port (None: not such a URL)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        return None
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def connection_problem(reason: object) -> str:
    """Why a server could not be reached (a URLError's reason), in words a user can act on."""
    import ssl

    if isinstance(reason, TimeoutError):
        return f"no answer within {HTTP_TIMEOUT_S:g} s"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return (f"the server's TLS certificate is not trusted ({reason.verify_message}): add its "
                "issuer to the CA bundle SSL_CERT_FILE names")
    return reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)


class S3FileIO(ArrowFileIO):
    """A bucket prefix on AWS S3 or an S3-compatible store (``endpoint`` given)."""

    def __init__(self, bucket: str, prefix: str, *, endpoint: str | None = None, scheme: str = "https"):
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.endpoint, self.scheme = endpoint, scheme
        self._session = s3_session()
        region = self._session.region_name or ("us-east-1" if endpoint else None)
        if region is None:
            region = pafs.resolve_s3_region(bucket)
        creds = self._session.get_credentials()
        keys = {}
        if creds is not None:  # the same credentials for both clients, whatever boto3 resolved
            frozen = creds.get_frozen_credentials()
            keys = {"access_key": frozen.access_key, "secret_key": frozen.secret_key,
                    "session_token": frozen.token}
        fs = pafs.S3FileSystem(region=region, endpoint_override=endpoint, scheme=scheme, **keys)
        super().__init__(fs, f"{bucket}/{self.prefix}" if self.prefix else bucket)
        self.region = region
        self._client = None

    def _open_output(self, path: str):
        # An S3 object becomes visible only when its upload completes. pyarrow has no abort: a
        # stream closed after an error still completes, so pushers compare sizes before
        # skipping a file that is already there, and pullers check every hash.
        return self.fs.open_output_stream(self.full_path(path), compression=None)

    def write_bytes(self, path: str, data: bytes) -> None:
        if len(data) < _SMALL:  # one PutObject; pyarrow's stream costs several requests
            self.client.put_object(Bucket=self.bucket, Key=self._key(path), Body=bytes(data))
        else:
            super().write_bytes(path, data)

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    @property
    def client(self):
        """boto3, only for conditional writes (pyarrow has none); created on first use."""
        if self._client is None:
            from botocore.config import Config

            config = Config(s3={"addressing_style": "path"} if self.endpoint else {})
            if self.endpoint:  # S3-compatible stores often mishandle trailing checksums
                config = config.merge(Config(request_checksum_calculation="when_required",
                                             response_checksum_validation="when_required"))
            url = f"{self.scheme}://{self.endpoint}" if self.endpoint else None
            self._client = self._session.client("s3", region_name=self.region, endpoint_url=url,
                                                config=config)
        return self._client

    def read_ref(self, path: str, limit: int) -> tuple[bytes | None, object]:
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self._key(path))
        except self.client.exceptions.NoSuchKey:
            self._refuse_folder(path)
            return None, None
        with obj["Body"] as body:
            return _bounded(body.read(limit + 1), path, limit), obj["ETag"]

    def swap_ref(self, path: str, data: bytes, expected: object) -> None:
        from botocore.exceptions import ClientError

        condition = {"IfMatch": expected} if expected is not None else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(path), Body=data, **condition)
        except ClientError as e:
            # 412: the condition failed; 409: a concurrent conditional write won the race.
            code = e.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise RefConflict(path) from None
            raise


HTTP_TIMEOUT_S = 30.0  # connect, and each read of a body: a stalled server is given up on
TOKEN_ENV = "COORD_TOKEN"


def token_headers() -> dict[str, str]:
    """The bearer token from ``COORD_TOKEN``, as a header (none when unset)."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}

_ABSENT = (404, 410)


class HttpError(Unavailable):
    """The server could not be reached, or answered other than with the object or a 404."""


class ReadOnlyRepository(Invalid):
    """A write or a listing asked of an HTTP repository."""


class _Body:
    """A response body whose network errors (a stall, a reset, a short body) are one-line HttpErrors."""

    def __init__(self, response: HTTPResponse, url: str):
        self.response, self.url = response, url

    def read(self, n: int) -> bytes:
        from http.client import HTTPException

        try:
            return self.response.read(n)
        except TimeoutError:
            raise HttpError(f"{self.url}: the server sent nothing for {HTTP_TIMEOUT_S:g} s") from None
        except (OSError, HTTPException) as e:
            raise HttpError(f"{self.url}: the download broke off ({e.__class__.__name__})") from None

    def __enter__(self) -> _Body:
        return self

    def __exit__(self, *_) -> None:
        self.response.close()


class HttpFileIO(FileIO):
    """A repository at an ``http(s)://`` URL, read with GET (and HEAD)."""

    read_only = True

    def __init__(self, root: str):
        super().__init__(root)
        self.token = token_headers()  # for the root's origin only

    def url(self, path: str) -> str:
        return f"{self.root}/{quote(path)}"

    def request_headers(self, path: str) -> dict[str, str]:
        """The headers a request for ``path`` carries besides the token."""
        return {}

    def _request(self, method: str, path: str) -> HTTPResponse | None:
        """The server's 200 answer (None: 404 or 410), else a one-line HttpError."""
        import http.client
        import urllib.error
        import urllib.request  # here: http.client and ssl cost an import only HTTP needs

        url = self.url(path)
        token = self.token if origin(url) == origin(self.root) else {}
        request = urllib.request.Request(url, method=method, headers={
            "User-Agent": "odf-coordinator", "Accept-Encoding": "identity", **token,
            **self.request_headers(path)})
        try:
            response = http_opener().open(request, timeout=HTTP_TIMEOUT_S)
        except urllib.error.HTTPError as e:
            e.close()
            if e.code in _ABSENT:
                return None
            raise HttpError(f"{url}: HTTP {e.code} {e.reason}") from None
        except TimeoutError as e:
            raise HttpError(f"{url}: {connection_problem(e)}") from None
        except urllib.error.URLError as e:
            raise HttpError(f"{url}: {connection_problem(e.reason)}") from None
        except (OSError, http.client.HTTPException) as e:
            raise HttpError(f"{url}: {e.__class__.__name__}: {e}") from None
        if response.status != 200:  # 2xx other than 200: not the object's bytes
            response.close()
            raise HttpError(f"{url}: HTTP {response.status} {response.reason} (expected 200)")
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            response.close()
            raise HttpError(f"{url}: the server sent it {encoding}-encoded, though asked for the "
                            "bytes as stored")
        return response

    def _open_input(self, path: str) -> _Body:
        response = self._request("GET", path)
        if response is None:
            raise FileNotFoundError(path)
        return _Body(response, self.url(path))

    def _refuse_folder(self, path: str) -> None:
        pass  # a URL names no folder: an absent object is just absent

    def is_file(self, path: str) -> bool:
        response = self._request("HEAD", path)
        if response is None:
            return False
        response.close()
        return True

    def list_files(self, prefix: str) -> dict[str, int]:
        raise ReadOnlyRepository(f"{self.url(prefix)}: a web server lists no folders, so only "
                                 "current-ODF (0.39) datasets can be pulled over HTTP")

    def _open_output(self, path: str):
        raise self._read_only()

    def read_ref(self, path: str, limit: int) -> tuple[bytes | None, object]:
        return self.read_bytes(path, limit), None

    def swap_ref(self, path: str, data: bytes, expected: object) -> None:
        raise self._read_only()

    def _read_only(self) -> CoordError:
        return ReadOnlyRepository(f"{self.root}: an HTTP repository is read-only (push to a folder "
                                  "or S3 repository, which a web server may then serve)")


@dataclass(frozen=True)
class RepositoryURL:
    """A parsed repository URL: a local folder, a bucket prefix at an optional endpoint, or a web URL."""

    url: str
    path: Path | None = None  # file://
    bucket: str | None = None  # s3 forms
    prefix: str = ""
    endpoint: str | None = None
    scheme: str = "https"
    web: str | None = None  # http(s):// (read-only)

    def open(self) -> FileIO:
        if self.path is not None:
            return LocalFileIO(self.path)
        if self.web is not None:
            return HttpFileIO(self.web)
        assert self.bucket is not None  # parse_url gives a path or a bucket
        return S3FileIO(self.bucket, self.prefix, endpoint=self.endpoint, scheme=self.scheme)


def parse_url(url: str) -> RepositoryURL:
    """Validate a repository URL (see the module docstring for the forms); no connection."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise RepositoryURLError(f"{url}: file URLs take an absolute path (file:///path)")
        return RepositoryURL(url, path=Path(parsed.path))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise RepositoryURLError(f"{url}: expected s3://bucket/prefix")
        return RepositoryURL(url, bucket=parsed.netloc, prefix=parsed.path.strip("/"))
    if parsed.scheme in ("s3+http", "s3+https"):
        bucket, _, prefix = parsed.path.lstrip("/").partition("/")
        if not parsed.netloc or not bucket:
            raise RepositoryURLError(f"{url}: expected {parsed.scheme}://host:port/bucket/prefix")
        return RepositoryURL(url, bucket=bucket, prefix=prefix.strip("/"), endpoint=parsed.netloc,
                             scheme=parsed.scheme[3:])
    if parsed.scheme in ("http", "https"):
        if not parsed.hostname or parsed.query or parsed.fragment:
            raise RepositoryURLError(f"{url}: expected {parsed.scheme}://host[:port]/path")
        return RepositoryURL(url, web=url.rstrip("/"))
    if parsed.scheme in ("odf+http", "odf+https"):
        raise RepositoryURLError(f"{url}: a smart transfer protocol URL names one dataset "
                                 "(coord pull odf+http://host:port/DS, coord push DS --to ...), "
                                 "not a repository")
    raise RepositoryURLError(
        f"{url}: unsupported repository URL (use file:///path, s3://bucket/prefix, "
        "s3+http(s)://host:port/bucket/prefix or http(s)://host/path)"
    )


def open_url(url: str) -> FileIO:
    return parse_url(url).open()
