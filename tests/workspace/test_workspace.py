"""Workspace layout, the commit protocol, locking and recovery."""
from __future__ import annotations

import stat
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.metadata import objects as o
from coordinator.metadata.signing import SigningKey
from coordinator.metadata.timestamps import TimeInterval, now_utc, parse_timestamp
from coordinator.workspace import CommitError, DatasetBusy, Workspace, WorkspaceError, layout
from coordinator.workspace.source_state import FilesGlobState, SourceState

ROOT_SOURCE = o.DatasetSourceRoot(
    fetch=o.FetchStepUrl(url="file:///dev/null"),
    read=o.ReadStepCsv(header=True),
    merge=o.MergeStrategyAppend(),
)


def first_block() -> o.MetadataBlock:
    return o.MetadataBlock(system_time=now_utc(), source=ROOT_SOURCE)


def data_block(tmp_path, n: int = 3):
    t = now_utc()
    path = tmp_path / f"slice-{n}.parquet"
    pq.write_table(pa.table({"event_time": list(range(n))}), path)
    block = o.MetadataBlock(
        system_time=t,
        output_slice=o.DataSlice(hash=bytes(32), interval=TimeInterval.singleton(t), num_records=n),
    )
    return block, path


def test_init_creates_an_owner_only_signing_key(ws):
    assert stat.S_IMODE(ws.key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ws.key_path.parent.stat().st_mode) == 0o700


def test_the_public_key_is_remembered_for_the_key_file_it_came_from(ws):
    key = Workspace.open(ws.root).public_key
    assert key == ws.signing_key.public_key
    assert (ws.meta / layout.PUBLIC_KEY).read_text().split()[1] == key.hex()
    # a key file replaced (say, restored from a backup) gives its own public key
    ws.key_path.unlink()
    other = SigningKey.generate(ws.key_path)
    assert Workspace.open(ws.root).public_key == other.public_key


def test_a_key_file_others_may_read_is_refused_even_when_its_public_key_is_remembered(ws):
    ws.key_path.chmod(0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        Workspace.open(ws.root).trusted_keys()


def test_a_derived_key_is_the_same_for_the_same_key_and_purpose_and_differs_otherwise(ws):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    other = SigningKey(Ed25519PrivateKey.from_private_bytes(bytes(32)))
    raw = [k.derive(p).public_key().public_bytes_raw()
           for k, p in ((ws.signing_key, "a"), (SigningKey.load(ws.key_path), "a"),
                        (ws.signing_key, "b"), (other, "a"))]
    assert raw[0] == raw[1] and len({raw[0], raw[2], raw[3], ws.public_key}) == 4


def test_init_refuses_an_existing_workspace(ws):
    with pytest.raises(WorkspaceError):
        Workspace.init(ws.root)


def test_commits_link_blocks_and_move_the_head(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        h1 = w.commit(first_block())
        h2 = w.commit(o.MetadataBlock(system_time=now_utc(), output_watermark=now_utc()))
    assert ds.head() == h2
    chain = list(ds.blocks())
    assert [h for h, _ in chain] == [h2, h1]
    assert chain[0][1].prev_block_hash == h1


def test_every_block_is_signed_by_the_workspace_key(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(first_block())
    assert [c.signature.name for c in ds.chain()] == ["TRUSTED"]


def test_a_data_block_stores_its_slice_under_the_block_hash(ws, tmp_path):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(first_block())
        block, path = data_block(tmp_path)
        h = w.commit(block, data_file=path)
    assert pq.read_table(ds.data_file(h)).num_rows == 3
    assert not path.exists()


def test_a_second_writer_is_told_the_dataset_is_busy(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer():
        with pytest.raises(DatasetBusy, match="dataset org.example.a is busy"):
            with ds.writer():
                pass


def test_system_time_cannot_go_backwards(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(first_block())
        with pytest.raises(CommitError, match="earlier"):
            w.commit(o.MetadataBlock(system_time=now_utc() - timedelta(days=1)))


def test_a_block_one_nanosecond_before_the_head_is_refused(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(o.MetadataBlock(system_time=parse_timestamp("2020-01-01T00:00:00.000000002Z"),
                                 source=ROOT_SOURCE))
        with pytest.raises(CommitError, match="earlier"):
            w.commit(o.MetadataBlock(system_time=parse_timestamp("2020-01-01T00:00:00.000000001Z")))


def test_recovery_removes_files_of_an_unfinished_commit(ws, tmp_path):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(first_block())
    orphan = ds.block_path(bytes(range(32)))
    orphan.write_bytes(b"left by a crash")
    stray = ds.root / "data" / ".tmp-123"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"half")
    with ds.writer():
        pass
    assert not orphan.exists() and not stray.exists()
    assert len(list(ds.blocks())) == 1


def test_reset_moves_the_head_back_and_drops_later_blocks(ws, tmp_path):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        h1 = w.commit(first_block())
        block, path = data_block(tmp_path)
        h2 = w.commit(block, data_file=path)
        w.reset(h1)
    assert ds.head() == h1
    assert not ds.block_path(h2).exists() and not ds.data_file(h2).exists()


def test_source_state_is_read_from_the_newest_block_that_has_one(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(first_block(), source_state=SourceState(FilesGlobState("f1", "a.csv")))
        w.commit(o.MetadataBlock(system_time=now_utc(), output_watermark=now_utc()))
    assert ds.source_state() == SourceState(FilesGlobState("f1", "a.csv"))
