"""Garbage in a repository: every object kind refused in one line, nothing visible locally.

A derivative dataset (blocks, signatures, data files, checkpoints) is pushed once; each case
copies that repository (a folder, or a fresh prefix of one moto S3 server), damages one object
and runs the real ``coord pull`` in this process (and ``coord push`` for the ref, which push
reads too). Random bytes come from a fixed seed, so every run tries the same cases.
"""
from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from coordinator.cli.main import main
from coordinator.repository import add_repository, open_url, push_dataset
from coordinator.repository.remote import MAX_BLOCK, MAX_REF, MAX_SIGNATURE
from coordinator.workspace import Workspace, layout

from ..support.cli import coord
from .conftest import S3_ENV, make_derivative, make_root, with_repo

UP, DER = "org.example.events", "org.example.derived"
SEED = 17


@dataclass
class Pristine:
    folder: Path  # the repository as pushed
    source: Workspace  # the workspace that pushed it
    head: bytes
    transform: bytes  # a block with a data file and a checkpoint


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Pristine:
    root = tmp_path_factory.mktemp("pristine")
    ws = with_repo(Workspace.init(root / "ws"), (root / "repo").as_uri())
    der = make_derivative(ws, DER, make_root(ws, UP, slices=2))
    push_dataset(ws, DER, "shared")
    chain = [h for h, _ in der.blocks()]  # newest first
    return Pristine(root / "repo", ws, chain[0], chain[1])


@pytest.fixture(scope="module")
def s3(moto_endpoint):
    """A bucket on the session's moto server; each case copies the pristine repository to a prefix."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in S3_ENV.items():
            mp.setenv(k, v)
        mp.delenv("AWS_PROFILE", raising=False)
        yield boto3.client("s3", endpoint_url=f"http://{moto_endpoint}"), moto_endpoint


class Repo:
    """One damaged copy of the pristine repository, written through the storage it lives in."""

    def __init__(self, url: str, folder: Path | None, client=None, bucket: str = "", prefix: str = ""):
        self.url, self.folder = url, folder
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.io = open_url(url)

    def put(self, rel: str, data: bytes) -> None:
        """Write ``data`` under the derivative's ``rel``, whatever the name holds."""
        if self.folder is not None:
            path = self.folder / DER / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        else:
            self.client.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{DER}/{rel}", Body=data)

    def replace_by_folder_key(self, rel: str) -> None:
        """(S3) Delete the object at ``rel`` and put a ``rel/`` folder marker in its place."""
        self.client.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{DER}/{rel}")
        self.client.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{DER}/{rel}/", Body=b"")

    def get(self, rel: str) -> bytes:
        return self.io.read_bytes(f"{DER}/{rel}", MAX_BLOCK)


@pytest.fixture
def repo(request, pristine, tmp_path) -> Repo:
    if request.param == "file":
        shutil.copytree(pristine.folder, tmp_path / "repo")
        return Repo((tmp_path / "repo").as_uri(), tmp_path / "repo")
    client, endpoint = request.getfixturevalue("s3")
    bucket, prefix = "fuzz-repo", tmp_path.name
    if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=bucket)  # again after another module reset the server
    for path in pristine.folder.rglob("*"):
        if path.is_file() and not path.name.endswith(".lock"):
            key = f"{prefix}/{path.relative_to(pristine.folder).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return Repo(f"s3+http://{endpoint}/{bucket}/{prefix}", None, client, bucket, prefix)


# --- the damage ---------------------------------------------------------------------------------

rng = random.Random(SEED)
NOISE = {n: rng.randbytes(n) for n in (32, 600, 5000)}


def _block(p: Pristine) -> str:
    return layout.block_file(p.transform)


def _sig(p: Pristine) -> str:
    return layout.signature_file(p.transform)


def _data(p: Pristine) -> str:
    return layout.data_file(p.transform)


def _ckpt(p: Pristine) -> str:
    return layout.checkpoint_dir(p.transform)


GARBAGE = hashlib.sha3_256(NOISE[600]).digest()  # the name under which NOISE[600] is "sealed"


def _put_sealed_garbage(r: Repo, p: Pristine) -> None:
    """A head block whose bytes hash to its name (so it passes the hash) but are no block."""
    r.put(f"meta/blocks/{GARBAGE.hex()}", NOISE[600] + GARBAGE)
    r.put("meta/refs/head", GARBAGE.hex().encode())


def _link_out(rel_of):
    """Replace a file of the folder repository with a link to a secret outside it."""
    def damage(r: Repo, p: Pristine) -> None:
        secret = r.folder.parent / "secret"
        secret.write_bytes(b"not for the repository")
        path = r.folder / DER / rel_of(p)
        path.unlink()
        path.symlink_to(secret)

    return damage


def _file_for_folder(r: Repo, rel: str) -> None:
    shutil.rmtree(r.folder / DER / rel)
    r.put(rel, b"not a folder")


# name → (damage(repo, pristine), what the one line must say: a format with the pristine's fields)
REF_CASES = {
    "ref random bytes": (lambda r, p: r.put("meta/refs/head", NOISE[32]), "not a block hash"),
    "ref truncated": (lambda r, p: r.put("meta/refs/head", p.head.hex()[:40].encode()), "not a block hash"),
    "ref extended": (lambda r, p: r.put("meta/refs/head", p.head.hex().encode() + b"00\n"),
                     "not a block hash"),
    "ref oversized": (lambda r, p: r.put("meta/refs/head", b"0" * (MAX_REF + 1)), "larger than"),
    "ref upper case": (lambda r, p: r.put("meta/refs/head", p.head.hex().upper().encode()),
                       "not a block hash"),
    "ref is a path with ..": (lambda r, p: r.put("meta/refs/head", b"../../../../etc/passwd\n"),
                              "not a block hash"),
    "ref is a path with /": (lambda r, p: r.put("meta/refs/head", f"{p.head.hex()}/x\n".encode()),
                             "not a block hash"),
}

OBJECT_CASES = {
    "block random bytes": (lambda r, p: r.put(_block(p), NOISE[600]),
                           "block {transform}: content hash does not match its name"),
    "block truncated": (lambda r, p: r.put(_block(p), r.get(_block(p))[:-40]),
                        "block {transform}: content hash does not match its name"),
    "block extended": (lambda r, p: r.put(_block(p), r.get(_block(p)) + NOISE[32]),
                       "block {transform}: content hash does not match its name"),
    "block oversized": (lambda r, p: r.put(_block(p), bytes(MAX_BLOCK + 1)),
                        "block {transform}: block is larger than"),
    "block is another block": (lambda r, p: r.put(_block(p), r.get(f"meta/blocks/{p.head.hex()}")),
                               "block {transform}: content hash does not match its name"),
    "block empty": (lambda r, p: r.put(_block(p), b""),
                    "block {transform}: content hash does not match its name"),
    "head block hashes to its name but is no block": (
        _put_sealed_garbage, "block {garbage}: not a valid MetadataBlock"),
    "signature random bytes": (lambda r, p: r.put(_sig(p), NOISE[600]),
                               "block {transform}: signature does not match the block"),
    "signature truncated": (lambda r, p: r.put(_sig(p), r.get(_sig(p))[:-20]),
                            "block {transform}: signature does not match the block"),
    "signature extended": (lambda r, p: r.put(_sig(p), r.get(_sig(p)) + b"\x00" + NOISE[32]),
                           "block {transform}: signature does not match the block"),
    "signature oversized": (lambda r, p: r.put(_sig(p), b"#" * (MAX_SIGNATURE + 1)),
                            "block {transform}: signature is larger than"),
    "data random bytes": (lambda r, p: r.put(_data(p), NOISE[5000]),
                          "block {transform}: .*data/{transform}: physical hash differs"),
    "data truncated": (lambda r, p: r.put(_data(p), r.get(_data(p))[:-100]),
                       "block {transform}: .*data/{transform}: physical hash differs"),
    "data extended": (lambda r, p: r.put(_data(p), r.get(_data(p)) + NOISE[600]),
                      "block {transform}: .*data/{transform}: physical hash differs"),
    "data oversized": (lambda r, p: r.put(_data(p), r.get(_data(p)) * 2000),
                       "block {transform}: .*data/{transform}: physical hash differs"),
}

S3_ONLY_CASES = {  # names a folder cannot hold
    "checkpoint name with ..": (lambda r, p: r.put(f"{_ckpt(p)}/../../../../../escape", b"x"),
                                "not a plain file name"),
    "checkpoint name with //": (lambda r, p: r.put(f"{_ckpt(p)}/state//0.delta", b"x"),
                                "not a plain file name"),
    "checkpoint name with a backslash": (lambda r, p: r.put(f"{_ckpt(p)}/..\\..\\escape", b"x"),
                                         "not a plain file name"),
    "block is a folder key": (lambda r, p: r.replace_by_folder_key(_block(p)),
                              "block {transform}: block is a folder, not a file"),
    "signature is a folder key": (lambda r, p: r.replace_by_folder_key(_sig(p)),
                                  "block {transform}: signature is a folder, not a file"),
}
OUTSIDE = "block {transform}: .*outside the repository"

FOLDER_ONLY_CASES = {  # S3 has no links, and moto refuses a newline in a key
    "checkpoint name with a newline": (lambda r, p: r.put(f"{_ckpt(p)}/a\nb", b"x"),
                                       "not a plain file name"),
    "block is a link out of the folder": (_link_out(_block), OUTSIDE),
    "signature is a link out of the folder": (_link_out(_sig), OUTSIDE),
    "data file is a link out of the folder": (_link_out(_data), OUTSIDE),
    "checkpoint file is a link out of the folder": (_link_out(lambda p: f"{_ckpt(p)}/offsets"), OUTSIDE),
    "ref is a link out of the folder": (_link_out(lambda p: "meta/refs/head"), "ref .*outside"),
    "the blocks folder is a file": (lambda r, p: _file_for_folder(r, "meta/blocks"),
                                    f"{DER}/meta/blocks is a file, not a folder"),
    "the data folder is a file": (lambda r, p: _file_for_folder(r, "data"),
                                  f"{DER}/data is a file, not a folder"),
}

CASES = {**OBJECT_CASES, **S3_ONLY_CASES, **FOLDER_ONLY_CASES}
RUNS = [("file", c) for c in {**OBJECT_CASES, **FOLDER_ONLY_CASES}] + \
       [("s3", c) for c in {**OBJECT_CASES, **S3_ONLY_CASES}]


# --- running the real command ------------------------------------------------------------------


def run_coord(capsys, *args: str) -> tuple[int, str]:
    """``coord ARGS`` in this process: (exit code, stderr)."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def visible(root: Path) -> set[str]:
    """Every file and folder of a workspace but lock files (pull takes the dataset's lock)."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.name.endswith(".lock")}


def assert_refused(code: int, stderr: str, pattern: str) -> None:
    assert code != 0
    assert stderr.count("\n") == 1 and stderr.startswith("coord: error: "), stderr
    assert "Traceback" not in stderr
    assert re.search(pattern, stderr), stderr


def pull_is_refused(repo: Repo, tmp_path: Path, capsys, pattern: str) -> None:
    ws = with_repo(Workspace.init(tmp_path / "ws"), repo.url)
    before = visible(tmp_path)
    code, stderr = run_coord(capsys, "-w", str(ws.root), "pull", f"shared/{DER}")
    assert_refused(code, stderr, pattern)
    assert "nothing was pulled" in stderr or "ref " in stderr
    assert visible(tmp_path) - before <= {"ws/.coord/run/pull"}, visible(tmp_path) - before
    assert not ws.dataset(DER).exists()


@pytest.mark.parametrize(("repo", "case"), RUNS, indirect=["repo"])
def test_a_damaged_object_is_refused_on_pull(repo, pristine, tmp_path, capsys, case):
    damage, template = CASES[case]
    damage(repo, pristine)
    pattern = template.format(transform=pristine.transform.hex(), garbage=GARBAGE.hex())
    pull_is_refused(repo, tmp_path, capsys, pattern)


@pytest.mark.parametrize("repo", ["file", "s3"], indirect=True)
@pytest.mark.parametrize("case", REF_CASES)
def test_a_damaged_ref_is_refused_on_pull_and_push(repo, pristine, tmp_path, capsys, case):
    damage, pattern = REF_CASES[case]
    damage(repo, pristine)
    pull_is_refused(repo, tmp_path, capsys, f"ref {DER}/meta/refs/head: .*{pattern}")
    damaged = repo.get("meta/refs/head")
    name = tmp_path.name.replace("_", "-")
    add_repository(pristine.source, name, repo.url)
    code, stderr = run_coord(capsys, "-w", str(pristine.source.root), "push", DER, "--to", name)
    assert_refused(code, stderr, pattern)
    assert repo.get("meta/refs/head") == damaged


@pytest.mark.parametrize("repo", ["s3"], indirect=True)
def test_a_ref_that_is_a_folder_key_is_named_as_such(repo, tmp_path, capsys):
    repo.replace_by_folder_key("meta/refs/head")
    pull_is_refused(repo, tmp_path, capsys, f"ref {DER}/meta/refs/head is a folder, not a file$")


# what stands in place of an object of a folder repository: how to make it, and its name
NOT_A_FILE = {"named pipe": os.mkfifo, "folder": os.mkdir}
NOT_A_FILE_AT = {"block": _block, "signature": _sig, "ref": lambda p: "meta/refs/head"}


@pytest.mark.parametrize("kind", NOT_A_FILE)
@pytest.mark.parametrize("what", NOT_A_FILE_AT)
def test_an_object_that_is_not_a_file_ends_the_pull_at_once_naming_it(pristine, tmp_path, kind, what):
    """A named pipe would block a reader forever: the real command must end, in seconds."""
    shutil.copytree(pristine.folder, tmp_path / "repo")
    path = tmp_path / "repo" / DER / NOT_A_FILE_AT[what](pristine)
    path.unlink()
    NOT_A_FILE[kind](path)
    ws = with_repo(Workspace.init(tmp_path / "ws"), (tmp_path / "repo").as_uri())
    before = visible(tmp_path)
    result = coord("pull", f"shared/{DER}", cwd=ws.root, check=False, timeout=20)
    named = (f"ref {DER}/meta/refs/head" if what == "ref" else f"block {pristine.transform.hex()}: {what}")
    assert_refused(result.returncode, result.stderr, re.escape(f"{named} is a {kind}, not a file"))
    assert visible(tmp_path) - before <= {"ws/.coord/run/pull"}, visible(tmp_path) - before
    assert not ws.dataset(DER).exists()


LOCAL_DAMAGE = {  # a pulled copy damaged on disk afterwards: what `coord verify` must say
    "block random bytes": (lambda ds, h: ds.block_path(h).write_bytes(NOISE[600]),
                           "content hash does not match its name"),
    "block truncated": (lambda ds, h: ds.block_path(h).write_bytes(ds.block_path(h).read_bytes()[:-40]),
                        "content hash does not match its name"),
    "block extended": (lambda ds, h: ds.block_path(h).write_bytes(ds.block_path(h).read_bytes() + NOISE[32]),
                       "content hash does not match its name"),
    "signature random bytes": (lambda ds, h: ds.signature_path(h).write_bytes(NOISE[600]),
                               "signature does not match the block"),
    "data random bytes": (lambda ds, h: ds.data_file(h).write_bytes(NOISE[5000]), "physical hash differs"),
}


@pytest.mark.parametrize("case", LOCAL_DAMAGE)
def test_verify_of_a_pulled_copy_damaged_afterwards_says_what_did_not_match(pristine, tmp_path, capsys, case):
    ws = with_repo(Workspace.init(tmp_path / "ws"), pristine.folder.as_uri())
    # only the damage is wrong
    ws.save_config(ws.config().set("trustedKeys", [pristine.source.signing_key.public_key.hex()]))
    assert run_coord(capsys, "-w", str(ws.root), "pull", f"shared/{DER}")[0] == 0
    damage, reason = LOCAL_DAMAGE[case]
    damage(ws.dataset(DER), pristine.transform)
    code, stderr = run_coord(capsys, "-w", str(ws.root), "verify", DER, "--integrity")
    assert_refused(code, stderr, f"first bad block {pristine.transform.hex()}: .*{reason}")
