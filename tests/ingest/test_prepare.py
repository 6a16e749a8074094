"""Prepare step: gzip, zip (with and without subPath), pipe."""
import gzip
import sys
import zipfile

import pytest

from coordinator.ingest import IngestError
from coordinator.ingest.prepare import prepare
from coordinator.metadata.objects import CompressionFormat, PrepStepDecompress, PrepStepPipe

ZIP = CompressionFormat.ZIP


def make_zip(path, members: dict):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


def test_gzip_is_decompressed(tmp_path):
    src = tmp_path / "a.csv.gz"
    src.write_bytes(gzip.compress(b"a\n1\n"))
    out = prepare(src, [PrepStepDecompress(format=CompressionFormat.GZIP)], tmp_path, "a.csv.gz")
    assert out.read_bytes() == b"a\n1\n"


def test_zip_sub_path_glob_selects_the_member(tmp_path):
    src = make_zip(tmp_path / "a.zip", {"README": "x", "data/part.csv": "a\n1\n"})
    out = prepare(src, [PrepStepDecompress(format=ZIP, sub_path="data/*.csv")], tmp_path, "a.zip")
    assert out.read_bytes() == b"a\n1\n"


def test_zip_with_one_file_needs_no_sub_path(tmp_path):
    src = make_zip(tmp_path / "a.zip", {"only.csv": "a\n"})
    assert prepare(src, [PrepStepDecompress(format=ZIP)], tmp_path, "a.zip").read_text() == "a\n"


def test_zip_sub_path_that_selects_several_files_is_an_error(tmp_path):
    src = make_zip(tmp_path / "a.zip", {"x.csv": "", "y.csv": ""})
    with pytest.raises(IngestError, match=r"a.zip: decompress zip: subPath '\*.csv' must select "
                                          r"exactly one file, found 2"):
        prepare(src, [PrepStepDecompress(format=ZIP, sub_path="*.csv")], tmp_path, "a.zip")


def test_pipe_runs_a_command_from_stdin_to_stdout(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("abc")
    upper = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"]
    assert prepare(src, [PrepStepPipe(command=upper)], tmp_path, "in.txt").read_text() == "ABC"


def test_failing_pipe_reports_status_and_stderr(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("abc")
    fail = [sys.executable, "-c", "import sys; sys.stderr.write('no good'); sys.exit(3)"]
    with pytest.raises(IngestError, match="in.txt: pipe .* exited with status 3: no good"):
        prepare(src, [PrepStepPipe(command=fail)], tmp_path, "in.txt")


def test_steps_chain_in_order(tmp_path):
    src = tmp_path / "a.gz"
    src.write_bytes(gzip.compress(b"abc"))
    rev = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read()[::-1])"]
    steps = [PrepStepDecompress(format=CompressionFormat.GZIP), PrepStepPipe(command=rev)]
    assert prepare(src, steps, tmp_path, "a.gz").read_text() == "cba"
