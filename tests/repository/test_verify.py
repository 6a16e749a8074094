"""verify: every kind of tampering is found, and the oldest bad block is named first."""
from __future__ import annotations

import shutil

import pytest

from coordinator.metadata.signing import SignatureStatus, SigningKey, verified_fact
from coordinator.trust.verify import Problem, verify, verify_dataset
from coordinator.workspace import Workspace, layout

from ..support.cli import coord
from ..support.tamper import flip_a_byte
from .conftest import make_derivative, make_root

DS = "org.example.events"


def _slices(ds) -> list[bytes]:
    """Hashes of the blocks with data, oldest first."""
    return [h for h, b in reversed(list(ds.blocks())) if b.output_slice]


def test_an_untouched_dataset_verifies(ws):
    make_root(ws, DS, slices=3)
    report = verify_dataset(ws, DS, integrity_only=False)
    assert report.ok and len(report.blocks) == 4
    assert {cb.signature for cb in report.blocks} == {SignatureStatus.TRUSTED}
    assert report.reproducibility == "not applicable (root dataset: its data comes from outside)"


def test_reproducibility_is_reported_honestly(ws):
    der = make_derivative(ws, "org.example.derived", make_root(ws, DS, slices=2))
    assert verify_dataset(ws, der.id, integrity_only=False).reproducibility == \
        "not checked (engine replay unavailable)"
    assert verify_dataset(ws, der.id, integrity_only=True).reproducibility == "not checked (--integrity)"

    seen = {}

    def replay(ds, blocks):
        seen["blocks"] = [cb.hash for cb in blocks]
        return [Problem(blocks[-1].hash, "output hash differs on replay")]

    report = verify_dataset(ws, der.id, integrity_only=False, replay=replay)
    assert seen["blocks"] == [cb.hash for cb in report.blocks]  # oldest first
    assert report.first_problem == Problem(der.head(), "output hash differs on replay")
    assert report.reproducibility == "1 block(s) did not reproduce"


def edit_block(ds, h):
    flip_a_byte(ds.block_path(h))


def flip_data_byte(ds, h):
    flip_a_byte(ds.data_file(h))


def swap_data_file(ds, h):
    other = next(x for x in _slices(ds) if x != h)
    shutil.copyfile(ds.data_file(other), ds.data_file(h))


def delete_data_file(ds, h):
    ds.data_file(h).unlink()


def resign_with_unknown_key(ds, h):
    stranger = SigningKey.generate(ds.ws.root / f"stranger-{h.hex()}.pem")
    ds.signature_path(h).write_bytes(stranger.sign(h).to_bytes())


def delete_signature(ds, h):
    ds.signature_path(h).unlink()


TAMPERINGS = {
    "block bytes": (edit_block, "content hash does not match its name"),
    "data bytes": (flip_data_byte, "physical hash differs"),
    "data swapped for another valid slice": (swap_data_file, "physical hash differs"),
    "data file deleted": (delete_data_file, "data file is missing"),
    "re-signed with an unknown key": (resign_with_unknown_key, "which is neither trusted nor pinned"),
    "signature deleted": (delete_signature, "unsigned and trust.require is known"),
}


@pytest.mark.parametrize("case", TAMPERINGS)
def test_tampering_names_the_oldest_bad_block_and_why(ws, case):
    ds = make_root(ws, DS, slices=4)
    first_bad, later_bad = _slices(ds)[1], _slices(ds)[2]
    tamper, reason = TAMPERINGS[case]
    tamper(ds, later_bad)
    tamper(ds, first_bad)

    report = verify_dataset(ws, DS, integrity_only=True)
    assert not report.ok
    assert report.first_problem.block_hash == first_bad
    assert reason in report.first_problem.reason


def test_verify_checks_a_signature_the_workspace_remembers_as_valid(ws):
    ds = make_root(ws, DS, slices=2)
    h, other = _slices(ds)
    forged = ws.signing_key.sign(other)  # the workspace's key, over another block's hash
    ds.signature_path(h).write_bytes(forged.to_bytes())
    # and the local cache of signatures found valid claims it checked that one
    remembered = ws.meta / layout.cache_dir(DS, layout.VERIFIED)
    remembered.parent.mkdir(parents=True, exist_ok=True)
    with open(remembered, "ab") as f:
        f.write(verified_fact(h, forged))
    later = Workspace.open(ws.root)  # a later command takes the cache's word when reading
    assert len(list(later.dataset(DS).blocks())) == 3

    report = verify_dataset(later, DS, integrity_only=True)
    assert not report.ok
    assert report.first_problem.block_hash == h
    assert "signature does not match" in report.first_problem.reason


def test_the_logical_hash_catches_a_swap_when_no_physical_hash_is_recorded(ws):
    ds = make_root(ws, DS, slices=2, physical=False)
    first, second = _slices(ds)
    shutil.copyfile(ds.data_file(second), ds.data_file(first))
    problem = verify_dataset(ws, DS, integrity_only=True).first_problem
    assert problem.block_hash == first and "logical hash differs" in problem.reason


def test_unsigned_history_before_the_first_signed_block_is_listed_not_refused(ws):
    ds = make_root(ws, DS, slices=3)
    history = [h for h, _ in reversed(list(ds.blocks()))][:2]  # as a tool that does not sign left it
    for h in history:
        ds.signature_path(h).unlink()
    report = verify_dataset(ws, DS, integrity_only=True)
    assert report.ok
    assert [cb.signature for cb in report.blocks] == [SignatureStatus.UNSIGNED] * 2 + \
        [SignatureStatus.TRUSTED] * 2


def test_a_missing_checkpoint_of_a_transform_block_is_found(ws):
    der = make_derivative(ws, "org.example.derived", make_root(ws, DS, slices=2), steps=2)
    transforms = [h for h, b in reversed(list(der.blocks())) if b.input_slices]
    shutil.rmtree(der.checkpoint_dir(transforms[0]))
    problem = verify_dataset(ws, der.id, integrity_only=True).first_problem
    assert problem.block_hash == transforms[0] and "checkpoint folder" in problem.reason


def test_recursive_verifies_upstream_first(ws):
    up = make_root(ws, DS, slices=2)
    der = make_derivative(ws, "org.example.derived", up)
    flip_a_byte(up.data_file(_slices(up)[0]))
    reports = verify(ws, der.id, recursive=True, integrity_only=True)
    assert [r.dataset_id for r in reports] == [DS, der.id]
    assert [r.ok for r in reports] == [False, True]
    assert [r.dataset_id for r in verify(ws, der.id, integrity_only=True)] == [der.id]


def test_verify_command_reports_and_fails(ws):
    ds = make_root(ws, DS, slices=3)
    ok = coord("verify", DS, "--integrity", cwd=ws.root)
    assert "integrity: ok" in ok.stdout and "authorship: ok (trust.require: known)" in ok.stdout

    bad = _slices(ds)[1]
    flip_a_byte(ds.data_file(bad))
    failed = coord("verify", DS, cwd=ws.root, check=False)
    assert failed.returncode == 1
    assert f"BAD  {bad.hex()[:12]}" in failed.stdout
    assert "reproducibility: not applicable" in failed.stdout
    assert f"first bad block {bad.hex()}: data/{bad.hex()}: physical hash differs" in failed.stderr


def test_verify_o_json_reports_each_dataset_and_fails_with_the_report_on_stdout(ws):
    import json

    der = make_derivative(ws, "org.example.derived", make_root(ws, DS, slices=2))
    [report] = json.loads(coord("verify", "--integrity", "-o", "json", der.id, cwd=ws.root).stdout)
    assert report["id"] == der.id and report["ok"] is True
    assert [b["check"] for b in report["blocks"]] == ["ok", "ok", "ok"]
    assert report["reproducibility"] == {"verdict": "not checked (--integrity)", "problems": []}
    assert report["authorship"]["signers"][0]["blocks"] == 3

    flip_data_byte(der, _slices(der)[-1])
    done = coord("verify", "--integrity", "-r", "-o", "json", der.id, cwd=ws.root, check=False)
    assert done.returncode == 1 and done.stderr.startswith(f"coord: error: {der.id}: first bad block")
    reports = json.loads(done.stdout)
    assert [(r["id"], r["ok"]) for r in reports] == [(DS, True), (der.id, False)]
    assert [b["check"] for b in reports[1]["blocks"]] == ["ok", "ok", "bad"]
    assert reports[1]["integrity"]["problems"][0].startswith(f"block {_slices(der)[-1].hex()}: ")
