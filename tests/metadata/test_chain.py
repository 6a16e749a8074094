"""The chain check reports a bad block by hash and reason."""
from __future__ import annotations

import pytest

from coordinator.metadata import objects as o
from coordinator.metadata.block_hash import seal
from coordinator.metadata.chain import ChainError, walk
from coordinator.metadata.signing import Signature, SignatureStatus, SigningKey, check_signature
from coordinator.metadata.timestamps import format_timestamp, now_utc, parse_timestamp
from coordinator.workspace import Workspace, layout
from tests.workspace.test_workspace import first_block


@pytest.fixture
def ds(ws):
    ds = ws.dataset("org.example.a")
    with ds.writer() as w:
        w.commit(first_block())
        w.commit(o.MetadataBlock(system_time=now_utc(), output_watermark=now_utc()))
    return ds


def oldest(ds) -> bytes:
    return list(ds.blocks())[-1][0]


def test_a_flipped_byte_in_a_block_is_reported_by_hash(ds):
    h = oldest(ds)
    data = bytearray(ds.block_path(h).read_bytes())
    data[20] ^= 0xFF
    ds.block_path(h).write_bytes(bytes(data))
    with pytest.raises(ChainError) as e:
        list(ds.blocks())
    assert e.value.block_hash == h
    assert "does not match" in e.value.reason


def test_a_missing_block_is_reported(ds):
    h = oldest(ds)
    ds.block_path(h).unlink()
    with pytest.raises(ChainError, match=f"block {h.hex()}: block is missing"):
        list(ds.blocks())


def test_a_block_stored_under_another_name_is_reported(ds):
    newest, h = [h for h, _ in ds.blocks()]
    ds.block_path(h).write_bytes(ds.block_path(newest).read_bytes())
    with pytest.raises(ChainError, match="content hash does not match its name"):
        list(ds.blocks())


def test_a_tampered_signature_is_an_error(ds):
    h = oldest(ds)
    sig = ds.signature_path(h).read_text().replace("signature: ", "signature: 00")
    ds.signature_path(h).write_text(sig[:-3] + "\n")
    with pytest.raises(ChainError, match="signature does not match"):
        list(ds.blocks())


def test_a_block_signed_by_another_key_is_reported_as_unknown(ds, tmp_path):
    h = oldest(ds)
    other = SigningKey.generate(tmp_path / "other.pem")
    ds.signature_path(h).write_bytes(other.sign(h).to_bytes())
    statuses = [c.signature for c in ds.chain()]
    assert statuses == [SignatureStatus.TRUSTED, SignatureStatus.UNKNOWN_KEY]


def test_an_unsigned_block_is_reported_as_unsigned(ds):
    h = oldest(ds)
    ds.signature_path(h).unlink()
    assert [c.signature for c in ds.chain()][-1] is SignatureStatus.UNSIGNED


def test_a_second_walk_in_the_same_process_reads_no_block_again(ds, monkeypatch):
    list(ds.blocks())
    reads = []
    read_block = type(ds).read_block
    monkeypatch.setattr(type(ds), "read_block", lambda self, h: reads.append(h) or read_block(self, h))
    assert len(list(ds.ws.dataset(ds.id).blocks())) == 2
    assert reads == []


def test_a_block_replaced_since_it_was_checked_is_checked_again(ds):
    h = oldest(ds)
    path = ds.block_path(h)
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF
    replacement = path.with_name("replacement")
    replacement.write_bytes(bytes(data))
    replacement.replace(path)  # a new inode, as an atomic rewrite makes
    with pytest.raises(ChainError, match="does not match"):
        list(ds.blocks())


def test_a_later_command_takes_the_signatures_an_earlier_one_found_valid(ds):
    list(Workspace.open(ds.ws.root).dataset(ds.id).blocks())  # an earlier command checks them
    remembered = ds.ws.meta / layout.cache_dir(ds.id, layout.VERIFIED)
    assert remembered.stat().st_size == 2 * 32  # one fact per signed block
    later = Workspace.open(ds.ws.root).dataset(ds.id)
    assert [c.signature for c in later.chain()] == [SignatureStatus.TRUSTED] * 2
    assert remembered.stat().st_size == 2 * 32  # nothing checked again, so nothing added


def test_a_signature_replaced_after_it_was_found_valid_is_checked_again(ds):
    h, other = oldest(ds), list(ds.blocks())[0][0]
    list(Workspace.open(ds.ws.root).dataset(ds.id).blocks())
    # well formed, by the workspace's key, but over another block's hash
    ds.signature_path(h).write_bytes(ds.ws.signing_key.sign(other).to_bytes())
    with pytest.raises(ChainError, match=f"block {h.hex()}: signature does not match"):
        list(Workspace.open(ds.ws.root).dataset(ds.id).blocks())


def test_a_remembered_signature_in_a_torn_file_is_checked_again(ds):
    list(Workspace.open(ds.ws.root).dataset(ds.id).blocks())
    remembered = ds.ws.meta / layout.cache_dir(ds.id, layout.VERIFIED)
    remembered.write_bytes(remembered.read_bytes()[:40])  # a crash in the middle of a write
    assert len(list(Workspace.open(ds.ws.root).dataset(ds.id).blocks())) == 2
    assert remembered.stat().st_size == 2 * 32  # the torn fact's block was checked again
    list(Workspace.open(ds.ws.root).dataset(ds.id).blocks())
    assert remembered.stat().st_size == 2 * 32  # and is remembered whole


class _Blocks(dict):
    """A block source from sealed bytes, unsigned."""

    def read_block(self, block_hash: bytes) -> bytes | None:
        return self.get(block_hash)

    def read_signature(self, block_hash: bytes) -> bytes | None:
        return None


def _chain(*system_times: str) -> tuple[_Blocks, bytes]:
    source, prev = _Blocks(), None
    for t in system_times:
        block = o.MetadataBlock(prev_block_hash=prev, system_time=parse_timestamp(t),
                                source=first_block().source if prev is None else None)
        sealed, data = seal(block)
        source[sealed.block_hash] = data
        prev = sealed.block_hash
    return source, prev


def test_system_time_one_nanosecond_before_its_predecessor_is_reported():
    source, head = _chain("2020-01-01T00:00:00.000000002Z", "2020-01-01T00:00:00.000000001Z")
    with pytest.raises(ChainError, match="system time goes backwards") as e:
        list(walk(source, head))
    assert e.value.block_hash == head


def test_system_times_apart_by_a_nanosecond_pass_and_keep_their_digits():
    source, head = _chain("2020-01-01T00:00:00.000000001Z", "2020-01-01T00:00:00.000000002Z")
    times = [format_timestamp(c.block.system_time) for c in walk(source, head)]
    assert times == ["2020-01-01T00:00:00.000000002Z", "2020-01-01T00:00:00.000000001Z"]


@pytest.mark.parametrize("spelling", [
    "algorithm: ed25519\npublicKey: {k}\nsignature: {s}\n",  # as coord writes it
    "signature: {s}\npublicKey: {k}\nalgorithm: ed25519\n",  # keys in another order
    "# signed\nalgorithm: 'ed25519'\npublicKey: \"{k}\"\nsignature: {s}",  # quoted, no LF
    '{{"algorithm": "ed25519", "publicKey": "{k}", "signature": "{s}"}}',  # JSON is YAML
])
def test_a_signature_file_reads_the_same_however_its_yaml_is_spelled(spelling, tmp_path):
    signed = SigningKey.generate(tmp_path / "key.pem").sign(bytes(32))
    text = spelling.format(k=signed.public_key.hex(), s=signed.signature.hex())
    assert Signature.from_bytes(text.encode()) == signed


def test_a_signature_file_of_another_algorithm_is_refused(tmp_path):
    signed = SigningKey.generate(tmp_path / "key.pem").sign(bytes(32))
    text = signed.to_bytes().replace(b"ed25519", b"rsa")
    assert check_signature(bytes(32), text, set()) == (SignatureStatus.INVALID, None)
