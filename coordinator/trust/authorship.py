"""Authorship: who signed each block, and whether this workspace accepts that signer.

Integrity (every hash, link and signature intact) is ``metadata.chain``'s question; this
module answers the other one, as ssh's known_hosts, git's ``gpg.minTrustLevel`` and TUF's key
pinning do. The signer of a block is, for this workspace and dataset:

- TRUSTED: this workspace's own key, or a key the user trusts (``coord trust add KEY``,
  kept as ``"HEX [NAME]"`` lines under ``trustedKeys`` in ``.coord/config.yaml``);
- PINNED: a key recorded for this dataset (trust on first use: the first pull records the
  signers of what it pulled; ``coord trust add KEY --dataset DS`` accepts another one);
- UNKNOWN: another key, on a dataset that has no pinned key;
- CHANGED: another key, on a dataset whose pinned keys are others;
- UNSIGNED_HISTORY: no signature, on a block older than the dataset's first signed block:
  history written by a tool that does not sign (the reference implementation of ODF 0.18
  did not), accepted by ``known`` and ``any``;
- UNSIGNED: no signature on a block after a signed one (signatures stripped or forgotten).

The same rules judge ODF 0.18 blocks and current-ODF (0.39) ones (``SignedBlock``): a dataset
the reference implementation wrote carries no signatures at all, so it is UNSIGNED_HISTORY.

The policy ``trust.require`` says what fails ``verify`` and ``pull``: ``trusted`` (only
TRUSTED passes), ``known`` (the default: TRUSTED and PINNED pass, so pulling a public dataset
works as is while a later change of key is refused) or ``any`` (authorship never fails; it is
still reported). What passes but is not TRUSTED is reported as a warning.

Pins are per-dataset state in ``.coord/cache/<id>/signers.json`` (``{"pinned": [HEX...]}``),
beside the dataset's remembered remotes, so deleting the dataset forgets them too.
"""
from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import CoordError, NotFound
from ..metadata.signing import parse_public_key
from ..workspace import DatasetNotFound, Workspace, layout
from ..workspace.fsutil import atomic_write


class Authorship(enum.Enum):
    TRUSTED = "trusted"
    PINNED = "pinned"
    UNKNOWN = "unknown"
    CHANGED = "changed"
    UNSIGNED_HISTORY = "unsigned history"
    UNSIGNED = "unsigned"


class Policy(enum.Enum):
    TRUSTED = "trusted"
    KNOWN = "known"
    ANY = "any"

    def accepts(self, status: Authorship) -> bool:
        if self is Policy.ANY:
            return True
        if self is Policy.KNOWN:
            return status in (Authorship.TRUSTED, Authorship.PINNED, Authorship.UNSIGNED_HISTORY)
        return status is Authorship.TRUSTED


class TrustError(CoordError):
    pass


class UnknownKey(TrustError, NotFound):
    """The key is not among the trusted (or the dataset's pinned) keys."""


class SignedBlock(Protocol):
    """What authorship needs of a block: its hash and the key of its valid signature (None:
    unsigned). An ODF 0.18 ``ChainBlock`` is one; so is a current-ODF block as a pull checked it
    (``hash``: its multihash's digest)."""

    @property
    def hash(self) -> bytes: ...

    @property
    def signer(self) -> bytes | None: ...


@dataclass(frozen=True)
class BlockAuthor:
    block_hash: bytes
    signer: bytes | None
    status: Authorship


@dataclass(frozen=True)
class Signer:
    """One signer of a run of blocks, as a summary shows it."""

    key: bytes | None  # None: the blocks are unsigned
    status: Authorship
    blocks: int
    name: str = ""  # the trusted key's owner, as the user named it
    pinned: tuple[bytes, ...] = ()  # for CHANGED: the keys the dataset expected


def policy(ws: Workspace) -> Policy:
    return Policy(ws.config().trust.require)  # the config checked it is one of them


# --- trusted keys ------------------------------------------------------------------------------


def add_trusted(ws: Workspace, key_text: str, name: str = "") -> bytes:
    key = parse_public_key(key_text)
    config = ws.config()
    entries = [e for e in config.trusted_keys if e.split(" ")[0] != key.hex()]
    entries.append(f"{key.hex()} {name}".strip())
    ws.save_config(config.set("trustedKeys", entries))
    return key


def remove_trusted(ws: Workspace, key_text: str) -> bytes:
    key = parse_public_key(key_text)
    if key == ws.public_key:
        raise TrustError("that is this workspace's own key: it is always trusted")
    config = ws.config()
    entries = config.trusted_keys
    kept = [e for e in entries if e.split(" ")[0] != key.hex()]
    if len(kept) == len(entries):
        raise UnknownKey(f"{key.hex()} is not a trusted key (see 'coord trust list')")
    ws.save_config(config.set("trustedKeys", kept))
    return key


# --- pins --------------------------------------------------------------------------------------


def pinned_keys(ws: Workspace, dataset_id: str) -> list[bytes]:
    path = ws.meta / layout.cache_dir(dataset_id, layout.SIGNERS)
    if not path.exists():
        return []
    return [bytes.fromhex(k) for k in json.loads(path.read_text()).get("pinned", [])]


def all_pins(ws: Workspace) -> dict[str, list[bytes]]:
    """Every dataset's pinned keys (the datasets that have some)."""
    pins = {ds.id: pinned_keys(ws, ds.id) for ds in ws.datasets()}
    return {i: keys for i, keys in pins.items() if keys}


def pin(ws: Workspace, dataset_id: str, keys: Iterable[bytes]) -> None:
    """Add ``keys`` to the dataset's pinned keys."""
    current = pinned_keys(ws, dataset_id)
    new = current + [k for k in dict.fromkeys(keys) if k not in current]
    if new != current:
        _save_pins(ws, dataset_id, new)


def pin_key(ws: Workspace, dataset_id: str, key_text: str) -> bytes:
    """``coord trust add KEY --dataset DS``: accept KEY as a signer of that dataset."""
    if not ws.dataset(dataset_id).exists():
        raise DatasetNotFound(dataset_id)
    key = parse_public_key(key_text)
    pin(ws, dataset_id, [key])
    return key


def unpin_key(ws: Workspace, dataset_id: str, key_text: str) -> bytes:
    key = parse_public_key(key_text)
    current = pinned_keys(ws, dataset_id)
    if key not in current:
        raise UnknownKey(f"{key.hex()} is not pinned for {dataset_id} (see 'coord trust list')")
    _save_pins(ws, dataset_id, [k for k in current if k != key])
    return key


def _save_pins(ws: Workspace, dataset_id: str, keys: list[bytes]) -> None:
    path = ws.meta / layout.cache_dir(dataset_id, layout.SIGNERS)
    atomic_write(path, json.dumps({"pinned": [k.hex() for k in keys]}, indent=1).encode())


# --- judging blocks ----------------------------------------------------------------------------


def authorship(ws: Workspace, blocks: Iterable[SignedBlock], pinned: Iterable[bytes], *,
               signed_before: bool = False) -> list[BlockAuthor]:
    """Each block's signer and its status, given the dataset's pinned keys; ``blocks`` oldest
    first, ``signed_before``: an older block of the dataset is signed."""
    trusted, pinned = ws.trusted_keys(), set(pinned)
    authors = []
    for cb in blocks:
        signed_before = signed_before or cb.signer is not None
        authors.append(BlockAuthor(cb.hash, cb.signer, _status(cb.signer, trusted, pinned, signed_before)))
    return authors


def _status(signer: bytes | None, trusted: frozenset[bytes], pinned: set[bytes],
            signed_before: bool) -> Authorship:
    if signer is None:
        return Authorship.UNSIGNED if signed_before else Authorship.UNSIGNED_HISTORY
    if signer in trusted:
        return Authorship.TRUSTED
    if signer in pinned:
        return Authorship.PINNED
    return Authorship.CHANGED if pinned else Authorship.UNKNOWN


def signers(ws: Workspace, authors: list[BlockAuthor], pinned: Iterable[bytes]) -> list[Signer]:
    """The distinct signers of ``authors`` (oldest first), with how many blocks each signed."""
    names, pinned = ws.trusted_key_names(), tuple(pinned)
    counts: dict[tuple, int] = {}
    for a in authors:
        counts[(a.signer, a.status)] = counts.get((a.signer, a.status), 0) + 1
    return [_signer(key, status, n, names, pinned) for (key, status), n in counts.items()]


def block_signers(ws: Workspace, dataset_id: str, newest_first: Sequence[SignedBlock]) -> list[Signer]:
    """Each block's signer as a one-block ``Signer``, in the order given (a chain as walked),
    judged against the dataset's pins as ``verify`` judges it: what ``coord log`` and the API's
    chain show per block."""
    names, pinned = ws.trusted_key_names(), tuple(pinned_keys(ws, dataset_id))
    authors = authorship(ws, newest_first[::-1], pinned)[::-1]
    return [_signer(a.signer, a.status, 1, names, pinned) for a in authors]


def _signer(key: bytes | None, status: Authorship, blocks: int, names: dict[bytes, str],
            pinned: tuple[bytes, ...]) -> Signer:
    return Signer(key, status, blocks, names.get(key, "") if key else "",
                  pinned if status is Authorship.CHANGED else ())


def admit_pull(
    ws: Workspace, dataset_id: str, local: Sequence[SignedBlock], new: Sequence[SignedBlock]
) -> list[Signer]:
    """Check the signers of blocks about to be pulled; return them, or raise TrustError.

    The dataset's pins are the recorded ones or, for a copy pulled before pins were kept, the
    signers of its local blocks; a first pull pins the signers of what it pulls. Call
    ``record_pull`` once the blocks are installed.
    """
    pinned = pinned_keys(ws, dataset_id) or _signers_of(local) or _signers_of(new)
    authors = authorship(ws, new, pinned, signed_before=any(cb.signer for cb in local))
    rule = policy(ws)
    bad = failures(authors, rule)
    if bad:
        raise TrustError(f"{dataset_id}: block {bad[0].block_hash.hex()[:12]} "
                         f"is {explain(dataset_id, bad[0], pinned, rule)} (nothing was pulled)")
    return signers(ws, authors, pinned)


def record_pull(ws: Workspace, dataset_id: str, local: Sequence[SignedBlock],
                new: Sequence[SignedBlock]) -> None:
    """Pin what ``admit_pull`` accepted as the dataset's signers when it had none recorded."""
    if not pinned_keys(ws, dataset_id):
        pin(ws, dataset_id, _signers_of(local) or _signers_of(new))


def _signers_of(blocks: Iterable[SignedBlock]) -> list[bytes]:
    return list(dict.fromkeys(cb.signer for cb in blocks if cb.signer is not None))


def failures(authors: list[BlockAuthor], rule: Policy) -> list[BlockAuthor]:
    return [a for a in authors if not rule.accepts(a.status)]


def explain(dataset_id: str, author: BlockAuthor, pinned: Iterable[bytes], rule: Policy) -> str:
    """Why ``rule`` refuses the block's signer, and what to do ("signed by ..." or "unsigned ...")."""
    if author.signer is None:  # UNSIGNED or UNSIGNED_HISTORY
        return (f"unsigned and trust.require is {rule.value} "
                "(coord config set trust.require any accepts unsigned blocks)")
    key = author.signer.hex()
    if author.status is Authorship.CHANGED:
        was = ", ".join(k.hex() for k in pinned)
        return (f"signed by {key}, not by {was} pinned for this dataset "
                f"(if its owner changed keys: coord trust add {key} --dataset {dataset_id})")
    if author.status is Authorship.UNKNOWN and rule is Policy.KNOWN:
        return (f"signed by {key}, which is neither trusted nor pinned for this dataset "
                f"(coord trust add {key} --name WHO, or --dataset {dataset_id})")
    return (f"signed by {key}, which is not trusted and trust.require is {rule.value} "
            f"(coord trust add {key} --name WHO)")
