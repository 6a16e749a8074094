"""Verify datasets: integrity (hashes, links, signatures, data files, checkpoints),
authorship and, when the transform layer provides a replay, reproducibility (spec: Dataset
Validation).

Integrity checks everything the chain commits to: every block hash and link, that each
signature present matches its block, every data file's physical hash (when recorded; the
logical hash when not, or always with ``deep``) and record count, and that transform blocks
of derivative datasets have their checkpoint. The report names the oldest bad block first:
that is where the dataset stopped being what its chain says.

Authorship is a separate question (``authorship.py``): who signed each block and whether the
workspace's ``trust.require`` accepts that signer. A good signature by a key not trusted is
never an integrity problem.

Reproducibility re-runs every transform; that needs the engine, so ``replay`` is a callable
the transform layer passes in. Without it the report says so instead of claiming success. A
block that does not reproduce still holds its author's bytes: it is a ``replay_problems``
entry, never an integrity problem.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..metadata.chain import ChainBlock, ChainError, walk
from ..metadata.flatbuffers_codec import BlockFormatError, decode_block
from ..metadata.objects import DatasetSource, DatasetSourceDerivative, DatasetVocabulary, DataSlice
from ..workspace import Dataset, DatasetNotFound, Workspace
from ..workspace.config import OdfVersion
from ..workspace.dataset import CurrentOdfDataset
from ..workspace.fsutil import physical_hash
from ..workspace.graph import DatasetGraph
from ..workspace.progress import NoProgress, Progress
from .authorship import (
    BlockAuthor,
    Policy,
    Signer,
    authorship,
    explain,
    failures,
    pinned_keys,
    policy,
    signers,
)


@dataclass(frozen=True)
class Problem:
    block_hash: bytes  # a 0.39 block's: its binary multihash (b"" for refs/head itself)
    reason: str
    name: str | None = None  # how a 0.39 block is named: ``block <n> (<multihash>)``

    def __str__(self) -> str:
        return f"{self.name or 'block ' + self.block_hash.hex()}: {self.reason}"


# Given a dataset and its checked chain (oldest first), re-run each transform and return the
# blocks whose recomputed output differs (hash, record count or watermark) with the reason.
Replay = Callable[[Dataset, list[ChainBlock]], list[Problem]]


class CurrentOdf(Protocol):
    """How current-ODF (0.39) datasets are verified: given by a layer that reads them
    (``store.verified.CurrentVerifier``), as ``replay`` is by the transform layer."""

    def inputs(self, name: str) -> Iterable[str]: ...

    def verify(self, name: str, *, integrity_only: bool, deep: bool) -> VerifyReport: ...


@dataclass
class VerifyReport:
    dataset_id: str
    # oldest first, as far as readable; of a 0.39 dataset: ``store.signatures.SignedBlock``s
    blocks: list[ChainBlock] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # integrity, oldest block first
    authors: list[BlockAuthor] = field(default_factory=list)  # like ``blocks``
    signers: list[Signer] = field(default_factory=list)
    policy: Policy = Policy.KNOWN
    authorship_problems: list[Problem] = field(default_factory=list)  # signers the policy refuses
    reproducibility: str = ""
    replay_problems: list[Problem] = field(default_factory=list)  # blocks that did not reproduce
    # sound blocks the reference's pull refuses (a 0.39 chain coord wrote before it followed
    # that rule): the dataset cannot be shared, though its bytes are its author's
    reference_problems: list[Problem] = field(default_factory=list)
    odf: str = "0.18"  # the ODF version the dataset is stored in
    # of a compacted 0.39 dataset: how its compacted slices were checked, and what is checked
    # only with --deep (store.verify.compacted_note)
    compaction: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.problems or self.authorship_problems or self.replay_problems
                    or self.reference_problems)

    @property
    def first_problem(self) -> Problem | None:
        """The oldest integrity problem (the bytes are not the author's: nothing else can be
        trusted), else the oldest block that did not reproduce, else the first refused signer,
        else the oldest block the reference refuses."""
        problems = (self.problems or self.replay_problems or self.authorship_problems
                    or self.reference_problems)
        return problems[0] if problems else None


@dataclass(frozen=True)
class ExpectedFiles:
    """What one block commits to on disk besides itself."""

    block_hash: bytes
    slice: DataSlice | None  # the data file's expected content
    vocab: DatasetVocabulary  # the columns the logical hash leaves out / sorts by
    checkpoint: bool  # a transform step of a derivative dataset leaves engine state


def expected_files(
    blocks: Iterable[ChainBlock], vocab: DatasetVocabulary | None = None, source: DatasetSource | None = None
) -> list[ExpectedFiles]:
    """Per block (oldest first) the files it needs; ``vocab``/``source`` are in force before them."""
    out = []
    vocab = vocab or DatasetVocabulary()
    for cb in blocks:
        vocab = cb.block.vocab or vocab
        source = cb.block.source or source
        transform = isinstance(source, DatasetSourceDerivative) and cb.block.input_slices is not None
        out.append(ExpectedFiles(cb.hash, cb.block.output_slice, vocab, transform))
    return out


def check_data_file(
    path: Path, expected: DataSlice, vocab: DatasetVocabulary, digest: bytes | None = None,
    *, deep: bool = False,
) -> str | None:
    """Why the file is not the slice the block records, or None.

    A matching physical hash proves the bytes are the ones the block's author committed, so
    then the record count comes from the Parquet footer and the logical hash (which costs
    several times a SHA3 pass) is recomputed only with ``deep``; without a physical hash
    (slices written by other tools) the logical hash is the check. ``digest``: the file's
    SHA3-256 when the caller computed it while copying.
    """
    if not path.exists():
        return "data file is missing"
    if expected.physical_hash is not None and (digest or physical_hash(path)) != expected.physical_hash:
        return "physical hash differs from the block's (the file's bytes were changed)"
    import pyarrow as pa  # only now: verifying 0.39 datasets needs no pyarrow before hashing
    import pyarrow.parquet as pq

    from ..data.hashing import file_logical_hash

    logical = None
    try:
        if expected.physical_hash is not None and not deep:
            rows = pq.ParquetFile(path).metadata.num_rows
        else:  # a batch at a time when the file is in event-time order
            logical, rows = file_logical_hash(path, vocab.event_time, vocab.system_time)
    except (pa.ArrowException, OSError) as e:
        return f"not a readable Parquet file ({e})"
    if rows != expected.num_records:
        return f"has {rows} records, the block says {expected.num_records}"
    if logical is not None and logical != expected.hash:
        return "logical hash differs from the block's (the records were changed)"
    return None


def verify_dataset(
    ws: Workspace,
    dataset_id: str,
    *,
    integrity_only: bool,
    replay: Replay | None = None,
    deep: bool = False,
    progress: Progress | None = None,
    current: CurrentOdf | None = None,
) -> VerifyReport:
    """Check one dataset; ``deep`` recomputes logical hashes too (see ``check_data_file``);
    ``current``: how a current-ODF (0.39) dataset is verified (see ``CurrentOdf``)."""
    ds = ws.dataset(dataset_id)
    if not ds.exists():
        raise DatasetNotFound(dataset_id)
    if ws.odf_of(dataset_id) is OdfVersion.V039:
        if current is None:
            raise CurrentOdfDataset(dataset_id)
        return current.verify(dataset_id, integrity_only=integrity_only, deep=deep)
    report = VerifyReport(dataset_id)
    newest_first, order, chain_problems = _walk_past_breaks(ds)
    report.blocks = newest_first[::-1]
    age = {h: i for i, h in enumerate(reversed(order))}

    problems = chain_problems + _file_problems(ds, expected_files(report.blocks), deep,
                                               progress or NoProgress())
    problems.sort(key=lambda p: age[p.block_hash])
    report.problems = problems
    _judge_authorship(ws, report)

    source = next((cb.block.source for cb in newest_first if cb.block.source), None)
    if integrity_only:
        report.reproducibility = "not checked (--integrity)"
    elif not isinstance(source, DatasetSourceDerivative):
        report.reproducibility = "not applicable (root dataset: its data comes from outside)"
    elif chain_problems:
        report.reproducibility = "not checked (the chain is broken)"
    elif replay is None:
        report.reproducibility = "not checked (engine replay unavailable)"
    elif missing := _missing_inputs(ds, newest_first):
        why = f"input {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in this workspace"
        came_from = ds.remote("pull")
        how = (f"`coord pull -r {came_from}` brings a dataset's inputs with it" if came_from
               else f"pull {'it' if len(missing) == 1 else 'them'} first")
        report.reproducibility = f"not checked ({why})"
        report.replay_problems = [Problem(newest_first[0].hash, f"cannot replay: {why}; {how}")]
    else:
        mismatches = replay(ds, report.blocks)
        report.replay_problems = sorted(mismatches, key=lambda p: age[p.block_hash])
        report.reproducibility = (
            "reproduced" if not mismatches else f"{len(mismatches)} block(s) did not reproduce"
        )
    return report


def _missing_inputs(ds: Dataset, newest_first: list[ChainBlock]) -> list[str]:
    """The inputs some transform of the chain reads that this workspace does not hold."""
    declared = [i for cb in newest_first if isinstance(cb.block.source, DatasetSourceDerivative)
                for i in cb.block.source.inputs]
    return [i for i in dict.fromkeys(declared) if not ds.ws.dataset(i).exists()]


def verify(
    ws: Workspace,
    dataset_id: str,
    *,
    recursive: bool = False,
    integrity_only: bool = False,
    replay: Replay | None = None,
    deep: bool = False,
    progress: Progress | None = None,
    current: CurrentOdf | None = None,
) -> list[VerifyReport]:
    """Verify a dataset; with ``recursive`` its upstream datasets first (dependency order)."""
    graph = DatasetGraph(ws, current=current.inputs if current is not None else None)
    order = graph.order([dataset_id], recursive=True) if recursive else [dataset_id]
    return [verify_dataset(ws, i, integrity_only=integrity_only, replay=replay, deep=deep,
                           progress=progress, current=current) for i in order]


def _walk_past_breaks(ds: Dataset) -> tuple[list[ChainBlock], list[bytes], list[Problem]]:
    """The chain newest first like ``Dataset.chain``, but a bad block does not end the walk.

    To name the *oldest* bad block, the walk goes on from a broken block's own (unverified)
    link when its bytes still decode; every older block is then checked on its own merits.
    Returns the good blocks, every block hash in chain order and the chain problems.
    """
    good: list[ChainBlock] = []
    order: list[bytes] = []
    problems: list[Problem] = []
    head = ds.head()
    while head is not None:
        try:
            for cb in walk(ds, head, trusted=ds.ws.trusted_keys()):
                good.append(cb)
                order.append(cb.hash)
            return good, order, problems
        except ChainError as e:
            problems.append(Problem(e.block_hash, e.reason))
            if e.block_hash not in order:
                order.append(e.block_hash)
            head = _unverified_link(ds, e.block_hash)
    return good, order, problems


def _unverified_link(ds: Dataset, block_hash: bytes) -> bytes | None:
    data = ds.read_block(block_hash)
    try:
        return decode_block(data).prev_block_hash if data is not None else None
    except BlockFormatError:
        return None


def _judge_authorship(ws: Workspace, report: VerifyReport) -> None:
    pinned = pinned_keys(ws, report.dataset_id)
    report.policy = policy(ws)
    report.authors = authorship(ws, report.blocks, pinned)
    report.signers = signers(ws, report.authors, pinned)
    report.authorship_problems = [
        Problem(a.block_hash, explain(report.dataset_id, a, pinned, report.policy))
        for a in failures(report.authors, report.policy)
    ]


def _file_problems(
    ds: Dataset, expected: list[ExpectedFiles], deep: bool, progress: Progress
) -> list[Problem]:
    problems = [
        Problem(e.block_hash, f"checkpoint folder checkpoint/{e.block_hash.hex()} is missing")
        for e in expected
        if e.checkpoint and not ds.checkpoint_dir(e.block_hash).is_dir()
    ]
    slices = [e for e in expected if e.slice is not None]

    def check(e: ExpectedFiles) -> Problem | None:
        if e.slice is None:
            return None
        path = ds.data_file(e.block_hash)
        reason = check_data_file(path, e.slice, e.vocab, deep=deep)
        progress.advance(_size(path))
        return Problem(e.block_hash, f"data/{e.block_hash.hex()}: {reason}") if reason else None

    progress.start(sum(_size(ds.data_file(e.block_hash)) for e in slices), f"verifying {ds.id}")
    try:
        # hashlib and Arrow release the GIL, so threads use every core.
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            problems += [p for p in pool.map(check, slices) if p is not None]
    finally:
        progress.finish()
    return problems


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
