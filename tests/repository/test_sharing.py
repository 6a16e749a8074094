"""Push and pull through folder and S3 repositories: incremental, concurrent, crash-safe."""
from __future__ import annotations

import fcntl
import json
import os
import threading
import time

import pytest

from coordinator.metadata.chain import walk
from coordinator.metadata.ids import DatasetRef
from coordinator.metadata.objects import MetadataBlock
from coordinator.metadata.signing import SignatureStatus
from coordinator.metadata.timestamps import format_timestamp, parse_timestamp
from coordinator.repository import (
    RefConflict,
    RemoteDataset,
    RemotePullStatus,
    RepositoryError,
    SyncError,
    add_repository,
    delete_repository,
    list_repositories,
    open_url,
    pull_from_repository,
    pull_source,
    push_dataset,
)
from coordinator.repository import push as push_module
from coordinator.repository.fileio import LocalFileIO
from coordinator.repository.registry import remote_path
from coordinator.trust.authorship import Authorship
from coordinator.trust.slice_check import ChangedSlice
from coordinator.trust.verify import verify_dataset

from ..support.cli import coord, coord_started
from ..support.tamper import flip_a_byte
from .conftest import append_slices, make_derivative, make_root, snapshot, with_repo

DS = "org.example.events"
BIG = 1 << 30  # read limit for tampering with test files
REF = DatasetRef.parse(f"shared/{DS}")


def remote_of(url: str, name: str = DS) -> RemoteDataset:
    return RemoteDataset(open_url(url), name)


# --- repositories --------------------------------------------------------------------------------


def test_repositories_are_added_listed_and_deleted(ws, tmp_path):
    add_repository(ws, "local", (tmp_path / "r").as_uri())
    add_repository(ws, "minio", "s3+http://127.0.0.1:9000/bucket/datasets")
    assert [(r.name, r.url) for r in list_repositories(ws)] == [
        ("local", (tmp_path / "r").as_uri()),
        ("minio", "s3+http://127.0.0.1:9000/bucket/datasets"),
    ]
    with pytest.raises(RepositoryError, match="already exists"):
        add_repository(ws, "local", "s3://b")
    delete_repository(ws, "local")
    assert [r.name for r in list_repositories(ws)] == ["minio"]


@pytest.mark.parametrize("url", ["ftp://host/x", "file://relative/path", "s3+http://host:1/", "s3://"])
def test_bad_repository_urls_are_refused(ws, url):
    with pytest.raises(ValueError, match="file:///path|s3"):
        add_repository(ws, "r", url)


def test_repo_commands(ws, tmp_path):
    url = (tmp_path / "r").as_uri()
    coord("repo", "add", "local", url, cwd=ws.root)
    assert coord("repo", "list", cwd=ws.root).stdout.split() == ["local", url]
    listed = json.loads(coord("repo", "list", "-o", "json", cwd=ws.root).stdout)
    assert listed == [{"name": "local", "url": url}]
    coord("repo", "delete", "local", cwd=ws.root)
    assert coord("repo", "list", cwd=ws.root).stdout.strip() == ""
    bad = coord("repo", "delete", "local", cwd=ws.root, check=False)
    assert bad.returncode == 1 and "no repository named local" in bad.stderr


# --- push and pull -------------------------------------------------------------------------------


def test_push_then_pull_copies_every_file_unchanged(ws, other_ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=3)
    pushed = push_dataset(ws, DS, "shared")
    assert (pushed.blocks, pushed.files) == (4, 3 + 4 + 4)  # data, signatures, blocks

    pulled = pull_from_repository(with_repo(other_ws, repo_url), REF)
    assert (pulled.status, pulled.blocks) == (RemotePullStatus.PULLED, 4)
    assert pulled.message == "new dataset: pulling 4 blocks"
    assert snapshot(other_ws.dataset(DS)) == snapshot(ds)
    assert pull_source(other_ws, DS) == REF


def test_blocks_with_nanosecond_times_travel_unchanged(ws, other_ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    t = parse_timestamp("2099-01-01T00:00:00.123456789Z")
    with ds.writer() as w:
        w.commit(MetadataBlock(system_time=t, output_watermark=t))
    push_dataset(ws, DS, "shared")
    pull_from_repository(with_repo(other_ws, repo_url), REF)
    assert snapshot(other_ws.dataset(DS)) == snapshot(ds)
    _, newest = next(other_ws.dataset(DS).blocks())
    assert format_timestamp(newest.system_time) == format_timestamp(newest.output_watermark) == \
        "2099-01-01T00:00:00.123456789Z"
    other_ws.save_config(other_ws.config().set("trustedKeys", [ws.signing_key.public_key.hex()]))
    assert verify_dataset(other_ws, DS, integrity_only=True).ok


def test_pulled_blocks_keep_their_author_signature_pinned_until_trusted(ws, other_ws, tmp_path):
    url = (tmp_path / "r").as_uri()
    make_root(with_repo(ws, url), DS, slices=1)
    push_dataset(ws, DS, "shared")
    pull_from_repository(with_repo(other_ws, url), REF)
    report = verify_dataset(other_ws, DS, integrity_only=True)
    assert {cb.signature for cb in report.blocks} == {SignatureStatus.UNKNOWN_KEY}
    assert {a.signer for a in report.authors} == {ws.signing_key.public_key}
    assert {a.status for a in report.authors} == {Authorship.PINNED} and report.ok

    other_ws.save_config(other_ws.config().set("trustedKeys", [ws.signing_key.public_key.hex()]))
    report = verify_dataset(other_ws, DS, integrity_only=True)
    assert {a.status for a in report.authors} == {Authorship.TRUSTED} and report.ok


def test_only_new_blocks_travel_and_sides_report_in_words(ws, other_ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=2)
    push_dataset(ws, DS, "shared")
    pull_from_repository(with_repo(other_ws, repo_url), REF)

    append_slices(ds, 2)
    again = push_dataset(ws, DS)  # the target is remembered
    assert (again.blocks, again.files) == (2, 6)
    assert push_dataset(ws, DS).message == "shared/org.example.events is up to date"

    behind = pull_from_repository(other_ws, REF)
    assert (behind.status, behind.message) == (RemotePullStatus.PULLED, "local is 2 blocks behind; pulling")
    assert snapshot(other_ws.dataset(DS)) == snapshot(ds)
    assert pull_from_repository(other_ws, REF).message == "up to date"

    append_slices(other_ws.dataset(DS), 1)
    ahead = pull_from_repository(other_ws, REF)
    assert ahead.status is RemotePullStatus.AHEAD
    assert ahead.message == "local has 1 block the remote lacks (ahead)"


def test_diverged_copies_are_refused_both_ways(ws, other_ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    push_dataset(ws, DS, "shared")
    pull_from_repository(with_repo(other_ws, repo_url), REF)
    append_slices(ds, 2)
    push_dataset(ws, DS)
    mine = other_ws.dataset(DS)
    append_slices(mine, 1)
    before = snapshot(mine)

    with pytest.raises(SyncError, match=r"diverged: since block \w+ local has 1 block and .* has 2 "
                                        r"\(reset or delete the local copy\)"):
        pull_from_repository(other_ws, REF)
    with pytest.raises(SyncError, match="has blocks you don't .*: pull first"):
        push_dataset(other_ws, DS, "shared")
    assert snapshot(mine) == before


def test_push_without_a_target_says_how_to_give_one(ws, tmp_path):
    make_root(with_repo(ws, (tmp_path / "r").as_uri()), DS, slices=1)
    with pytest.raises(RepositoryError, match="--to REPO"):
        push_dataset(ws, DS)


def test_push_to_another_name_and_pull_as_another_name(ws, other_ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    push_dataset(ws, DS, "shared/org.example.renamed")
    assert remote_of(repo_url, "org.example.renamed").read_head()[0] == ds.head()
    pulled = pull_from_repository(with_repo(other_ws, repo_url),
                                  DatasetRef.parse("shared/org.example.renamed"), as_name="org.example.copy")
    assert pulled.dataset_id == "org.example.copy"
    assert other_ws.dataset("org.example.copy").head() == ds.head()


def test_pulling_a_derivative_brings_its_checkpoints(ws, other_ws, repo_url):
    up = make_root(with_repo(ws, repo_url), DS, slices=2)
    der = make_derivative(ws, "org.example.derived", up)
    push_dataset(ws, DS, "shared")
    push_dataset(ws, der.id, "shared")

    with_repo(other_ws, repo_url)
    pull_from_repository(other_ws, REF)
    pull_from_repository(other_ws, DatasetRef.parse("shared/org.example.derived"))
    copy = other_ws.dataset(der.id)
    assert snapshot(copy) == snapshot(der)
    assert all(copy.checkpoint_dir(h).is_dir() for h, b in copy.blocks() if b.input_slices)


# --- refusing what does not check out -------------------------------------------------------------


def _flip(data: bytes) -> bytes:
    return data[:100] + bytes([data[100] ^ 1]) + data[101:]


def _data(h: bytes) -> str:
    return f"{DS}/data/{h.hex()}"


def flip_data_byte(io, bad, good):
    io.write_bytes(_data(bad), _flip(io.read_bytes(_data(bad), BIG)))


def swap_data_file(io, bad, good):
    io.write_bytes(_data(bad), io.read_bytes(_data(good), BIG))


def edit_block(io, bad, good):
    path = f"{DS}/meta/blocks/{bad.hex()}"
    io.write_bytes(path, _flip(io.read_bytes(path, BIG)))


def delete_data_file(io, bad, good):
    io.fs.delete_file(io.full_path(_data(bad)))


TAMPERINGS = {  # how, and what the error must say besides the block
    "flipped byte in data": (flip_data_byte, "physical hash differs"),
    "data swapped for another valid slice": (swap_data_file, "physical hash differs"),
    "edited block": (edit_block, "content hash does not match its name"),
    "missing data file": (delete_data_file, "missing"),
}


@pytest.mark.parametrize("case", TAMPERINGS)
@pytest.mark.parametrize("first_pull", [True, False], ids=["first-pull", "update"])
def test_a_tampered_remote_is_refused_and_nothing_changes(ws, other_ws, repo_url, case, first_pull):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    with_repo(other_ws, repo_url)
    push_dataset(ws, DS, "shared")
    if not first_pull:
        pull_from_repository(other_ws, REF)
    bad, good = append_slices(ds, 2)
    push_dataset(ws, DS)
    tamper, reason = TAMPERINGS[case]
    tamper(open_url(repo_url), bad, good)
    before = snapshot(other_ws.dataset(DS))

    with pytest.raises(SyncError) as e:
        pull_from_repository(other_ws, REF)
    message = str(e.value)
    assert f"block {bad.hex()}" in message and reason in message
    file = f"meta/blocks/{bad.hex()}" if case == "edited block" else _data(bad)
    assert file in message
    assert snapshot(other_ws.dataset(DS)) == before
    assert other_ws.dataset(DS).exists() is (not first_pull)


def test_without_physical_hashes_the_logical_hash_catches_a_swap(ws, other_ws, tmp_path):
    url = (tmp_path / "r").as_uri()
    ds = make_root(with_repo(ws, url), DS, slices=2, physical=False)
    push_dataset(ws, DS, "shared")
    first, second = [h for h, b in reversed(list(ds.blocks())) if b.output_slice]
    io = open_url(url)
    io.write_bytes(_data(first), io.read_bytes(_data(second), BIG))
    with pytest.raises(SyncError, match=f"block {first.hex()}: .*{_data(first)}: logical hash differs"):
        pull_from_repository(with_repo(other_ws, url), REF)


def test_a_missing_checkpoint_of_a_derivative_is_refused(ws, other_ws, tmp_path):
    url = (tmp_path / "r").as_uri()
    der = make_derivative(ws, "org.example.derived", make_root(with_repo(ws, url), DS, slices=2))
    push_dataset(ws, der.id, "shared")
    newest = der.head()
    for f in (tmp_path / "r" / der.id / "checkpoint" / newest.hex()).rglob("*"):
        if f.is_file():
            f.unlink()
    with pytest.raises(SyncError, match=f"block {newest.hex()}: checkpoint folder .* is missing"):
        pull_from_repository(with_repo(other_ws, url), DatasetRef.parse(f"shared/{der.id}"))
    assert not other_ws.dataset(der.id).exists()


# --- concurrency and crashes ----------------------------------------------------------------------


def test_the_ref_is_compare_and_swap(repo_url):
    remote = remote_of(repo_url)
    head, token = remote.read_head()
    remote.swap_head(b"\x01" * 32, token)
    with pytest.raises(RefConflict):
        remote.swap_head(b"\x02" * 32, token)  # stale: someone moved it since
    assert remote.read_head()[0] == b"\x01" * 32


def test_pushers_swap_the_ref_one_at_a_time_though_each_removes_its_lock_file(tmp_path):
    # A pusher waiting on the lock may be granted it just after its holder removed the file; by
    # then another may hold a new file of that name: the waiter must wait for that one too.
    io, lock = LocalFileIO(tmp_path), tmp_path / DS / "refs" / "head.lock"
    lock.parent.mkdir(parents=True)
    first = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(first, fcntl.LOCK_EX)  # a pusher in its swap
    waiter = threading.Thread(target=io.swap_ref, args=(f"{DS}/refs/head", b"waiter's head", None))
    waiter.start()
    time.sleep(0.3)  # the waiter is blocked on the first pusher's lock file
    lock.unlink()  # the first pusher is done: it removes its lock file, then lets go
    second = os.open(lock, os.O_RDWR | os.O_CREAT)  # another pusher starts its swap meanwhile
    fcntl.flock(second, fcntl.LOCK_EX)
    os.close(first)
    waiter.join(timeout=0.5)
    assert waiter.is_alive() and not (tmp_path / DS / "refs" / "head").exists()  # still waiting
    os.close(second)
    waiter.join(timeout=10)
    assert (tmp_path / DS / "refs" / "head").read_bytes() == b"waiter's head"
    assert not lock.exists()


def test_a_push_that_loses_the_race_is_told_to_pull_first(ws, other_ws, repo_url, monkeypatch):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    push_dataset(ws, DS, "shared")
    pull_from_repository(with_repo(other_ws, repo_url), REF)
    append_slices(ds, 1)
    append_slices(other_ws.dataset(DS), 1)
    real = push_module.crash_point

    def rival_pushes_first(name: str) -> None:  # just before our head update
        if name == "push-metadata-uploaded":
            monkeypatch.setattr(push_module, "crash_point", real)
            push_dataset(other_ws, DS, "shared")

    monkeypatch.setattr(push_module, "crash_point", rival_pushes_first)
    with pytest.raises(SyncError, match="remote changed, pull first"):
        push_dataset(ws, DS, "shared")
    remote = remote_of(repo_url)
    assert remote.read_head()[0] == other_ws.dataset(DS).head()
    assert len(list(walk(remote, remote.read_head()[0]))) == 3


def test_two_processes_push_at_once_and_exactly_one_wins(ws, other_ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    push_dataset(ws, DS, "shared")
    pull_from_repository(with_repo(other_ws, repo_url), REF)
    append_slices(ds, 2, rows=50_000)  # some megabytes, so the uploads overlap
    append_slices(other_ws.dataset(DS), 2, rows=50_000)

    procs = [coord_started("push", DS, "--to", "shared", cwd=w.root) for w in (ws, other_ws)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 1], results
    winner, (_, loser_err) = (ws, other_ws)[[rc for rc, _ in results].index(0)], \
        next(r for r in results if r[0] == 1)
    assert "pull first" in loser_err
    remote = remote_of(repo_url)
    head = remote.read_head()[0]
    assert head == winner.dataset(DS).head()
    chain = list(walk(remote, head, trusted=winner.trusted_keys()))
    assert len(chain) == 4
    for cb in chain:
        if cb.block.output_slice:
            local = winner.dataset(DS).data_file(cb.hash).read_bytes()
            assert remote.io.read_bytes(_data(cb.hash), BIG) == local


@pytest.mark.parametrize("crash_at", ["push-file-uploaded", "push-metadata-uploaded"])
def test_a_push_killed_midway_leaves_the_old_head_and_the_next_push_completes(
    ws, other_ws, repo_url, crash_at, tmp_path
):
    ds = make_root(with_repo(ws, repo_url), DS, slices=1)
    push_dataset(ws, DS, "shared")
    old = ds.head()
    append_slices(ds, 3, rows=20_000)

    killed = coord("push", DS, cwd=ws.root, env={"COORD_CRASH_AT": crash_at}, check=False)
    assert killed.returncode == -9
    remote = remote_of(repo_url)
    assert remote.read_head()[0] == old
    with_repo(other_ws, repo_url)
    assert pull_from_repository(other_ws, REF).blocks == 2  # readable, at the old head
    assert other_ws.dataset(DS).head() == old

    done = coord("push", DS, cwd=ws.root)
    assert "pushed 3 blocks" in done.stdout
    assert remote.read_head()[0] == ds.head()
    assert pull_from_repository(other_ws, REF).message == "local is 3 blocks behind; pulling"
    assert snapshot(other_ws.dataset(DS)) == snapshot(ds)


def test_remote_path_includes_the_user_when_given():
    assert remote_path(DatasetRef.parse("repo/alice/org.example.a")) == "alice/org.example.a"


def test_a_changed_slice_is_never_pushed(ws, repo_url):
    ds = make_root(with_repo(ws, repo_url), DS, slices=2)
    changed = ds.data_files()[-1]
    flip_a_byte(changed)
    with pytest.raises(ChangedSlice, match=f"refusing to read {changed}: physical hash differs"):
        push_dataset(ws, DS, "shared")
    assert remote_of(repo_url).files("") == {}
