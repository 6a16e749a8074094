"""Prepare step: turn the fetched bytes into something a reader understands.

Every step writes a new file into the pull's scratch folder; the fetched file is never changed
(for ``filesGlob`` it is the user's own file).
"""
from __future__ import annotations

import fnmatch
import gzip
import shutil
import subprocess
import zipfile
import zlib
from pathlib import Path

from ..metadata.objects import CompressionFormat, PrepStep, PrepStepDecompress, PrepStepPipe
from ..workspace.fsutil import writing
from .errors import IngestError

_STDERR_TAIL = 2000  # characters of a failed command's stderr shown to the user


def prepare(path: Path, steps: list[PrepStep] | None, scratch: Path, name: str) -> Path:
    """Apply the steps in order; returns the final file (``path`` itself when there are none)."""
    for i, step in enumerate(steps or []):
        out = scratch / f"{path.name}.prep{i}"
        if isinstance(step, PrepStepDecompress):
            _decompress(path, step, out, name)
        else:
            _pipe(path, step, out, name)
        path = out
    return path


def _decompress(path: Path, step: PrepStepDecompress, out: Path, name: str) -> None:
    if step.format is CompressionFormat.GZIP:
        try:
            with gzip.open(path, "rb") as src, open(out, "wb") as dst, writing(out):
                shutil.copyfileobj(src, dst, 1 << 20)
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # a failed write is not bad input
            raise IngestError(f"{name}: decompress gzip: {e}") from None
        return
    try:
        with zipfile.ZipFile(path) as archive:
            member = _zip_member(archive, step.sub_path, name)
            with archive.open(member) as src, open(out, "wb") as dst, writing(out):
                shutil.copyfileobj(src, dst, 1 << 20)
    except zipfile.BadZipFile as e:
        raise IngestError(f"{name}: decompress zip: {e}") from None


def _zip_member(archive: zipfile.ZipFile, sub_path: str | None, name: str) -> str:
    """The one file to extract: ``subPath`` as a name or a glob; without it, the only file."""
    files = [m for m in archive.namelist() if not m.endswith("/")]
    matches = files if sub_path is None else \
        [m for m in files if m == sub_path or fnmatch.fnmatchcase(m, sub_path)]
    if len(matches) != 1:
        what = "the archive" if sub_path is None else f"subPath {sub_path!r}"
        raise IngestError(f"{name}: decompress zip: {what} must select exactly one file, "
                          f"found {len(matches)} among {files[:10]}")
    return matches[0]


def _pipe(path: Path, step: PrepStepPipe, out: Path, name: str) -> None:
    with open(path, "rb") as stdin, open(out, "wb") as stdout:
        try:
            done = subprocess.run(step.command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
        except OSError as e:
            raise IngestError(f"{name}: pipe {step.command}: cannot run: {e.strerror}") from None
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()[-_STDERR_TAIL:]
        raise IngestError(f"{name}: pipe {step.command} exited with status {done.returncode}"
                          + (f": {stderr}" if stderr else ""))
