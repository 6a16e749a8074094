"""``coord log`` of a current-ODF (0.39) dataset takes the signatures an earlier command found
valid, as a 0.18 chain's readers do (``cache/<name>/verified-signatures``, one SHA3-256 fact per
block hash, key and signature), and what changed since is found as before: a signature file
replaced is another fact, checked again; a block changed fails its hash, which no cache skips;
``coord verify`` checks every signature whatever the file says.

The dataset is written through the append path, each block signed by the workspace's key
(``tests/support/odf39_datasets.write_root``); the commands run in the test process.
"""
from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from coordinator.metadata.signing import Signature, SigningKey, verified_fact
from coordinator.workspace import Workspace
from coordinator.workspace import layout as ws_layout
from coordinator.workspace.config import OdfVersion
from tests.support.cli import coord_here
from tests.support.odf39_datasets import Written, write_root
from tests.support.tamper import flip_a_byte


@pytest.fixture
def signed(tmp_path) -> tuple[Workspace, Written]:
    ws = Workspace.init(tmp_path / "ws", OdfVersion.V039)
    written = write_root(ws.meta / "datasets" / "cities", ws.meta / "locks", tmp_path / "scratch",
                         signer=ws.signing_key)
    return ws, written


def remembered(ws: Workspace):
    return ws.meta / ws_layout.cache_dir("cities", ws_layout.VERIFIED)


def log_json(ws: Workspace) -> list[dict]:
    return json.loads(coord_here("log", "cities", "-o", "json", cwd=ws.root).stdout)


def test_a_later_log_takes_the_signatures_an_earlier_one_found_valid(signed, monkeypatch):
    ws, written = signed
    first = log_json(ws)
    assert [b["authorship"] for b in first] == ["trusted"] * len(written.blocks)
    assert remembered(ws).stat().st_size == 32 * len(written.blocks)  # a fact per signed block

    class NoCheck:  # the Ed25519 check, which a later log must not need
        @staticmethod
        def from_public_bytes(data):
            raise AssertionError("a signature found valid before was checked again")

    monkeypatch.setattr(ed25519, "Ed25519PublicKey", NoCheck)
    assert log_json(ws) == first
    assert remembered(ws).stat().st_size == 32 * len(written.blocks)  # nothing new to remember


def test_a_signature_replaced_after_a_log_is_checked_again(signed):
    ws, written = signed
    log_json(ws)
    second, other = written.blocks[1], written.blocks[2]
    # well formed, by the workspace's key, but over another block's hash
    (written.root / "signatures" / str(second)).write_bytes(ws.signing_key.sign(other.to_bytes()).to_bytes())
    by_block = {b["hash"]: b for b in log_json(ws)}
    assert by_block[str(second)]["authorship"] == "invalid signature"
    assert by_block[str(other)]["authorship"] == "trusted"
    verified = coord_here("verify", "cities", cwd=ws.root, check=False)
    assert verified.returncode != 0 and "signature does not match the block" in verified.stdout


def test_a_block_changed_after_a_cached_read_is_refused_as_before(signed):
    ws, written = signed
    log_json(ws)
    coord_here("list", cwd=ws.root)
    flip_a_byte(written.root / "blocks" / str(written.blocks[2]))
    for command in (("list",), ("status",), ("log", "cities")):
        refused = coord_here(*command, cwd=ws.root, check=False)
        assert refused.returncode == 1, command
        assert f"({written.blocks[2]})" in refused.stderr and "damaged" in refused.stderr, command
    verified = coord_here("verify", "cities", cwd=ws.root, check=False)
    assert verified.returncode != 0 and "damaged" in verified.stdout


def test_verify_checks_every_signature_whatever_the_readers_remembered(signed, tmp_path):
    ws, written = signed
    head = written.blocks[-1]
    # a signature that does not sign the head, and the readers' file claiming it was found valid
    stranger = SigningKey.generate(tmp_path / "stranger.pem")
    forged = Signature(stranger.public_key, bytes(64))
    (written.root / "signatures" / str(head)).write_bytes(forged.to_bytes())
    remembered(ws).parent.mkdir(parents=True, exist_ok=True)
    remembered(ws).write_bytes(verified_fact(head.to_bytes(), forged))
    assert log_json(ws)[0]["signer"] == stranger.public_key.hex()  # the log took the file's word
    verified = coord_here("verify", "cities", cwd=ws.root, check=False)
    assert verified.returncode != 0 and "signature does not match the block" in verified.stdout
