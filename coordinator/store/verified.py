"""``coord verify`` of a current-ODF (0.39) dataset of a workspace, into the report 0.18
datasets get (``trust.verify.VerifyReport``: same shape, same exit codes).

Invariants:

- Integrity is ``verify.verify_folder`` (every block against its name and the chain rules,
  every data file and checkpoint by size and physical hash before it is parsed, then each
  slice's offsets from its footer, and with ``--deep`` its logical hash; a compacted slice
  through its compacted rows, the report saying how in ``compaction``) plus each signature
  file against its block (``signatures``); problems are named ``block <n> (<multihash>)``, oldest
  first, ``refs/head`` first of all.
- Authorship is judged by ``trust.authorship`` under the workspace's policy: a dataset the
  reference wrote has no signatures, so its blocks are unsigned history, which the default
  policy accepts (and the report says).
- A block coord reads but the reference's pull refuses (what coord's earlier versions wrote,
  ``odf39.chain``: a transform's single ``query``) is no integrity problem: the report lists it
  apart (``reference_problems``), and it fails the verify, as the dataset cannot be shared.
- A derivative's steps are replayed by the function the caller gives (``replay``: the build
  layer's ``replay_current``, which sits above this one), only once integrity holds; without
  one the report says "not checked", and nothing starts an engine.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ..metadata.odf39.events import DatasetKind, Seed
from ..trust.authorship import explain, failures, pinned_keys, policy, signers
from ..trust.verify import Problem, VerifyReport
from ..workspace import Workspace
from . import signatures
from .dataset import CurrentDataset
from .overview import CurrentDatasets, InputNotFound
from .read import Problem as ReadProblem
from .read import refused_by_reference, walk
from .verify import compacted_note, verify_folder


class CurrentVerifier:
    """``trust.verify.CurrentOdf`` for the workspace's 0.39 datasets."""

    def __init__(self, ws: Workspace, replay: CurrentReplay | None = None):
        self.ws = ws
        self._current = CurrentDatasets(ws)
        self._replay = replay

    def inputs(self, name: str) -> Iterable[str]:
        return self._current.inputs(name)

    def verify(self, name: str, *, integrity_only: bool, deep: bool = False) -> VerifyReport:
        return verify_current(self.ws, name, integrity_only=integrity_only, deep=deep,
                              replay=self._replay)


# what a block the reference refuses is told, after the rule: why it is there, what to do
REFUSED = ("; the reference's pull refuses this block (coord wrote such blocks before it followed "
           "the rule), so the dataset cannot be shared: define it again under a new name (coord "
           "add) and pull it")


def _reported(p: ReadProblem, remedy: str = "") -> Problem:
    """A folder's problem as a report names it: ``block <n> (<multihash>)`` or ``refs/head``."""
    return Problem(p.block_hash.to_bytes() if p.block_hash else b"", p.reason + remedy,
                   str(p).removesuffix(f": {p.reason}") if p.block_hash else "refs/head")


# Re-runs every step of the named derivative from its inputs; the blocks that differ.
CurrentReplay = Callable[[str], list[Problem]]


def verify_current(ws: Workspace, name: str, *, integrity_only: bool, deep: bool = False,
                   replay: CurrentReplay | None = None) -> VerifyReport:
    """Check a current-ODF (0.39) dataset: ``store.verify.verify_folder`` (every block against
    its name and the chain rules, every data file and checkpoint by size and physical hash,
    then each slice's offsets and, with ``deep``, its logical hash), each signature file
    against its block, and the signers under the trust policy (``signatures``).
    A derivative's steps are then replayed with ``replay``, if given and the folder is whole."""
    root = CurrentDataset(ws, name).root
    newest_first, _ = walk(root)  # the blocks readable from the head (verify_folder names a break)
    signed = signatures.signed_blocks(ws, root, newest_first[::-1])
    report = VerifyReport(name, odf="0.39")
    report.blocks = signed  # type: ignore[assignment]
    report.problems = [_reported(p) for p in verify_folder(root, deep=deep)]
    report.compaction = compacted_note(root, deep)
    report.reference_problems = [_reported(p, REFUSED) for p in refused_by_reference(newest_first[::-1])]
    report.problems += [Problem(b.hash, f"{signatures.signature_name(b)}: signature does not match the block",
                                signatures.block_name(b)) for b in signed if b.invalid]
    age = {b.hash: i for i, b in enumerate(signed)}
    report.problems.sort(key=lambda p: age.get(p.block_hash, -1))
    pinned = pinned_keys(ws, name)
    report.policy = policy(ws)
    report.authors = signatures.authors(ws, name, signed)
    report.signers = signers(ws, report.authors, pinned)
    refused = {a.block_hash for a in failures(report.authors, report.policy)}
    report.authorship_problems = [
        Problem(a.block_hash, explain(name, a, pinned, report.policy), signatures.block_name(b))
        for a, b in zip(report.authors, signed, strict=True) if a.block_hash in refused
    ]
    seed = newest_first[-1].block.event if newest_first else None
    derivative = isinstance(seed, Seed) and seed.dataset_kind is DatasetKind.DERIVATIVE
    if integrity_only:
        report.reproducibility = "not checked (--integrity)"
    elif not derivative:
        report.reproducibility = "not applicable (root dataset: its data comes from outside)"
    elif report.problems:
        report.reproducibility = "not checked (the folder has problems)"
    elif replay is None:
        report.reproducibility = "not checked (engine replay unavailable)"
    else:
        try:
            report.replay_problems = replay(name)
        except InputNotFound as e:
            report.reproducibility = "not checked (an input is not in this workspace)"
            report.replay_problems = [Problem(b"", f"cannot replay: {e}", name)]
            return report
        n = len(report.replay_problems)
        report.reproducibility = f"{n} block(s) did not reproduce" if n else "reproduced"
    return report
