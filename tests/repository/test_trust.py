"""Trust: integrity and authorship are separate; a dataset's signer is pinned at first pull.

Alice publishes a dataset in a folder repository; Bob (another workspace, another key) pulls it
with the real ``coord``. Carol and Mallory are further workspaces that continue or re-sign it.
"""
from __future__ import annotations

import json

import pytest

from coordinator.metadata.ids import DatasetRef
from coordinator.metadata.signing import SigningKey
from coordinator.repository import pull_from_repository, push_dataset
from coordinator.trust.authorship import Authorship, Policy
from coordinator.workspace import Workspace, layout

from ..support.cli import coord
from .conftest import append_slices, make_root, snapshot, with_repo

DS = "org.example.events"


def key(ws: Workspace) -> str:
    return ws.signing_key.public_key.hex()


@pytest.fixture
def repo(tmp_path) -> str:
    return (tmp_path / "repo").as_uri()


@pytest.fixture
def alice(tmp_path, repo) -> Workspace:
    ws = with_repo(Workspace.init(tmp_path / "alice"), repo)
    make_root(ws, DS, slices=2)
    push_dataset(ws, DS, "shared")
    return ws


def workspace(tmp_path, repo, name: str) -> Workspace:
    return with_repo(Workspace.init(tmp_path / name), repo)


@pytest.fixture
def bob(tmp_path, repo) -> Workspace:
    return workspace(tmp_path, repo, "bob")


def continue_with_own_key(ws: Workspace, blocks: int = 1, target: str = "shared") -> None:
    """``ws`` pulls Alice's dataset, appends blocks signed with its own key and pushes them."""
    pull_from_repository(ws, DatasetRef.parse(f"shared/{DS}"))
    append_slices(ws.dataset(DS), blocks)
    push_dataset(ws, DS, target)


def test_own_key_is_trusted(alice):
    verified = coord("verify", DS, "--integrity", cwd=alice.root)
    assert "integrity: ok" in verified.stdout
    assert "authorship: ok (trust.require: known)" in verified.stdout
    assert f"3 blocks signed by {key(alice)} (trusted: this workspace)" in verified.stdout


def test_a_foreign_unknown_key_is_pinned_at_first_pull_with_a_warning(alice, bob):
    pulled = coord("pull", f"shared/{DS}", cwd=bob.root)
    assert f"{DS}: new dataset: pulling 3 blocks" in pulled.stdout
    assert (f"3 blocks signed by {key(alice)} (pinned for this dataset, not trusted; to trust its "
            f"owner: coord trust add {key(alice)} --name WHO)") in pulled.stdout

    verified = coord("verify", DS, "--integrity", cwd=bob.root)
    assert "integrity: ok" in verified.stdout
    assert "authorship: ok, with warnings (trust.require: known)" in verified.stdout
    listed = coord("trust", "list", cwd=bob.root).stdout
    assert f"{key(bob)}  this workspace" in listed and f"{key(alice)}  {DS}" in listed
    as_json = json.loads(coord("trust", "list", "-o", "json", cwd=bob.root).stdout)
    assert as_json == {"require": "known", "trusted": [{"key": key(bob), "name": "this workspace"}],
                       "pinned": {DS: [key(alice)]}}


def test_log_labels_each_block_by_its_signer_pinned_then_trusted(alice, bob):
    coord("pull", f"shared/{DS}", cwd=bob.root)
    shown = coord("log", DS, cwd=bob.root).stdout
    assert shown.count(f"# signed by {key(alice)} (pinned for this dataset, not trusted)\n") == 3
    assert "unknown" not in shown
    blocks = json.loads(coord("log", DS, "-o", "json", cwd=bob.root).stdout)
    assert {(b["signer"], b["authorship"]) for b in blocks} == {(key(alice), "pinned")}

    coord("trust", "add", key(alice), "--name", "alice", cwd=bob.root)
    assert coord("log", DS, cwd=bob.root).stdout.count(f"# signed by {key(alice)} (trusted: alice)\n") == 3


def test_log_calls_a_key_unknown_only_on_a_dataset_with_no_pins(alice, bob):
    coord("pull", f"shared/{DS}", cwd=bob.root)
    (bob.meta / layout.cache_dir(DS, layout.SIGNERS)).unlink()  # pulled before pins were kept
    assert coord("log", DS, cwd=bob.root).stdout.count(f"# signed by {key(alice)} (unknown key)\n") == 3


def test_a_foreign_trusted_key_is_named_by_its_owner(alice, bob):
    assert coord("trust", "add", key(alice), "--name", "alice", cwd=bob.root).stdout.strip() == \
        f"trusted {key(alice)} (alice)"
    pulled = coord("pull", f"shared/{DS}", cwd=bob.root)
    assert f"3 blocks signed by {key(alice)} (trusted: alice)" in pulled.stdout
    verified = coord("verify", DS, "--integrity", cwd=bob.root)
    assert "authorship: ok (trust.require: known)" in verified.stdout

    coord("trust", "remove", key(alice), cwd=bob.root)
    assert key(alice) not in coord("trust", "list", cwd=bob.root).stdout.split("pinned keys:")[0]


def test_a_key_change_between_pulls_is_refused_until_accepted(alice, bob, tmp_path, repo):
    coord("pull", f"shared/{DS}", cwd=bob.root)
    carol = workspace(tmp_path, repo, "carol")
    continue_with_own_key(carol)
    before = snapshot(bob.dataset(DS))

    refused = coord("pull", DS, cwd=bob.root, check=False)  # from where it came
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert f"is signed by {key(carol)}, not by {key(alice)} pinned for this dataset" in refused.stderr
    assert f"coord trust add {key(carol)} --dataset {DS}" in refused.stderr
    assert "nothing was pulled" in refused.stderr
    assert snapshot(bob.dataset(DS)) == before

    coord("trust", "add", key(carol), "--dataset", DS, cwd=bob.root)
    pulled = coord("pull", DS, cwd=bob.root)
    assert f"1 block signed by {key(carol)} (pinned for this dataset" in pulled.stdout
    assert coord("verify", DS, "--integrity", cwd=bob.root).returncode == 0


def test_a_block_re_signed_mid_chain_fails_authorship_not_integrity(alice, bob, tmp_path):
    coord("pull", f"shared/{DS}", cwd=bob.root)
    ds = bob.dataset(DS)
    middle = [h for h, _ in ds.blocks()][1]
    stranger = SigningKey.generate(tmp_path / "stranger.pem")
    ds.signature_path(middle).write_bytes(stranger.sign(middle).to_bytes())

    failed = coord("verify", DS, "--integrity", cwd=bob.root, check=False)
    assert failed.returncode == 1
    assert "integrity: ok" in failed.stdout and "authorship: FAILED (trust.require: known)" in failed.stdout
    stranger_key = stranger.public_key.hex()
    assert f"1 block signed by {stranger_key} (CHANGED: the dataset's pinned key is {key(alice)})" \
        in failed.stdout
    assert f"first bad block {middle.hex()}: signed by {stranger_key}, not by {key(alice)}" in failed.stderr


def test_a_re_signed_chain_is_refused_by_whoever_pinned_or_trusts_the_original(alice, bob, tmp_path, repo):
    coord("pull", f"shared/{DS}", cwd=bob.root)
    mallory = workspace(tmp_path, repo, "mallory")
    pull_from_repository(mallory, DatasetRef.parse(f"shared/{DS}"))
    forged = mallory.dataset(DS)
    for h, _ in forged.blocks():
        forged.signature_path(h).write_bytes(mallory.signing_key.sign(h).to_bytes())
    append_slices(forged, 1)
    push_dataset(mallory, DS, "shared/forged")

    refused = coord("pull", "shared/forged", "--as", DS, cwd=bob.root, check=False)
    assert refused.returncode == 1
    assert f"is signed by {key(mallory)}, not by {key(alice)} pinned for this dataset" in refused.stderr

    carol = workspace(tmp_path, repo, "carol")  # a first pull, with a policy that needs trust
    coord("config", "set", "trust.require", "trusted", cwd=carol.root)
    coord("trust", "add", key(alice), "--name", "alice", cwd=carol.root)
    refused = coord("pull", "shared/forged", cwd=carol.root, check=False)
    assert refused.returncode == 1
    assert f"is signed by {key(mallory)}, which is not trusted and trust.require is trusted" \
        in refused.stderr
    assert not carol.dataset("forged").exists()



def test_a_local_chain_re_signed_by_another_key_fails_authorship_not_integrity(alice, tmp_path):
    ds = alice.dataset(DS)
    stranger = SigningKey.generate(tmp_path / "stranger.pem")
    for h, _ in ds.blocks():
        ds.signature_path(h).write_bytes(stranger.sign(h).to_bytes())

    verified = coord("verify", DS, "--integrity", cwd=alice.root, check=False)
    assert verified.returncode == 1 and "integrity: ok" in verified.stdout
    assert "authorship: FAILED (trust.require: known)" in verified.stdout
    assert f"3 blocks signed by {stranger.public_key.hex()} (unknown key)" in verified.stdout
    assert "which is neither trusted nor pinned for this dataset" in verified.stderr


def test_unsigned_blocks_are_refused_unless_the_policy_accepts_them(alice, bob, tmp_path):
    newest = alice.dataset(DS).head()
    (tmp_path / "repo" / DS / "meta" / "signatures" / newest.hex()).unlink()

    refused = coord("pull", f"shared/{DS}", cwd=bob.root, check=False)
    assert refused.returncode == 1
    assert f"block {newest.hex()[:12]} is unsigned and trust.require is known" in refused.stderr
    assert not bob.dataset(DS).exists()

    coord("config", "set", "trust.require", "any", cwd=bob.root)
    pulled = coord("pull", f"shared/{DS}", cwd=bob.root)
    assert "1 block unsigned" in pulled.stdout and f"2 blocks signed by {key(alice)}" in pulled.stdout
    verified = coord("verify", DS, "--integrity", cwd=bob.root)
    assert "authorship: ok, with warnings (trust.require: any)" in verified.stdout


def test_unsigned_blocks_older_than_any_signature_are_history_known_accepts(alice, bob, tmp_path):
    # as a chain begun by a tool that does not sign (the reference implementation of ODF 0.18)
    oldest = [h for h, _ in alice.dataset(DS).blocks()][-1]
    (tmp_path / "repo" / DS / "meta" / "signatures" / oldest.hex()).unlink()
    pulled = coord("pull", f"shared/{DS}", cwd=bob.root)
    assert "1 block unsigned (older than any signature" in pulled.stdout
    assert "authorship: ok, with warnings" in coord("verify", DS, "--integrity", cwd=bob.root).stdout


def test_trust_refuses_what_is_not_a_key_and_the_workspace_own_key(bob):
    bad = coord("trust", "add", "abc123", cwd=bob.root, check=False)
    assert bad.returncode == 1 and "not an Ed25519 public key: 'abc123'" in bad.stderr
    own = coord("trust", "remove", key(bob), cwd=bob.root, check=False)
    assert own.returncode == 1 and "this workspace's own key" in own.stderr
    policy = coord("config", "set", "trust.require", "nobody", cwd=bob.root, check=False)
    assert policy.returncode == 1 and "not one of trusted, known, any" in policy.stderr


@pytest.mark.parametrize("policy, accepted", [
    (Policy.TRUSTED, {Authorship.TRUSTED}),
    (Policy.KNOWN, {Authorship.TRUSTED, Authorship.PINNED, Authorship.UNSIGNED_HISTORY}),
    (Policy.ANY, set(Authorship)),
])
def test_each_policy_accepts_exactly_its_signers(policy, accepted):
    assert {a for a in Authorship if policy.accepts(a)} == accepted
