"""File operations: durable writes (under a temporary name, fsync, rename into place), and
``physical_hash``, the SHA3-256 of a file's bytes (ODF's physical hash), which needs neither
numpy nor pyarrow: a check hashes files in threads while those are still being imported.

An OS error raised here names the file being written (a failed ``write()`` names none).
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

if TYPE_CHECKING:
    import pyarrow as pa

TMP_PREFIX = ".tmp-"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def tmp_name(directory: Path) -> Path:
    return directory / f"{TMP_PREFIX}{uuid.uuid4().hex}"


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """OS errors raised inside name ``path`` when they name no file themselves."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path.parent)
    with writing(path):
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk must not fill up with temporaries
            raise
    fsync_dir(path.parent)


def install(src: Path, dst: Path) -> None:
    """Move a finished file or folder to ``dst`` durably (copying across filesystems)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for f in [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]:
        try:
            _fsync_file(f)
        except FileNotFoundError:  # an engine's temporary, gone (store.checkpoint.pack_checkpoint)
            continue
    try:
        os.rename(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        tmp = tmp_name(dst.parent)
        with writing(dst):
            if src.is_dir():
                shutil.copytree(src, tmp)
            else:
                shutil.copyfile(src, tmp)
        install(tmp, dst)
        return
    fsync_dir(dst.parent)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def physical_hash(
    source: str | os.PathLike | BinaryIO | pa.NativeFile | pa.Buffer | bytes | memoryview,
) -> bytes:
    """SHA3-256 digest of a file's bytes: a path (read 4 MiB at a time) or an open binary file,
    or bytes already in memory (bytes, a memoryview, a pyarrow Buffer)."""
    if isinstance(source, (str, os.PathLike)):
        h = hashlib.sha3_256()
        chunk = memoryview(bytearray(1 << 22))  # read into, hashed in place (no copy)
        with open(source, "rb", buffering=0) as f:
            while n := f.readinto(chunk):
                h.update(chunk[:n])
        return h.digest()
    read = getattr(source, "read", None)
    if read is None:  # bytes in memory (a pyarrow Buffer has the buffer protocol, no read)
        return hashlib.sha3_256(cast(Any, source)).digest()
    h = hashlib.sha3_256()
    while data := read(1 << 20):
        h.update(data)
    return h.digest()
