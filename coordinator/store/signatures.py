"""Who signed the blocks of a current-ODF (0.39) dataset, judged as ``authorship.py`` judges
a 0.18 chain's (``trust.authorship``).

A 0.39 block's signature is ``signatures/<multihash>`` beside it (``store/layout.py``): the
0.18 signature document over the block's binary multihash (``Multihash.to_bytes``). The
signer's status (trusted, pinned, unknown, changed, unsigned history, unsigned) and the trust
policy are ``authorship.py``'s, over the same pins, so ``coord log``, ``coord verify`` and the
policy speak of both versions alike.

Invariants:

- A block without a signature file is unsigned. The reference (kamu) signs nothing, so a
  dataset it wrote is unsigned from its Seed on: ``UNSIGNED_HISTORY``, which the default
  policy (``known``) accepts; a block unsigned after a signed one is ``UNSIGNED``.
- A signature file that is not a valid signature of its block is an integrity problem
  (``invalid``), never an authorship one, as for 0.18.
- A reading command (``coord log``) passes the dataset's signatures found valid before
  (``Workspace.checked_blocks(name).signatures``: ``cache/<name>/verified-signatures``, the
  file a 0.18 chain's readers use), so it checks with Ed25519 only the signatures it has not
  seen valid; a signature file changed since is another fact, checked anew. ``coord verify``
  passes none and checks every signature.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..metadata.signing import SignatureStatus, VerifiedSignatures, check_signature
from ..trust.authorship import BlockAuthor, Signer, authorship, block_signers, pinned_keys
from ..workspace import Workspace
from . import layout
from .read import StoredBlock


@dataclass(frozen=True)
class SignedBlock:
    """A 0.39 block with its signer: what ``authorship`` reads of a block (``hash``, ``signer``)."""

    stored: StoredBlock
    signer: bytes | None  # None: unsigned, or a signature that is not valid
    invalid: bool  # a signature file that does not sign this block

    @property
    def block(self):
        """The decoded block (``store.read.StoredBlock.block``)."""
        return self.stored.block

    @property
    def hash(self) -> bytes:
        """The block's binary multihash: what its signature signs and a problem names."""
        return self.stored.hash.to_bytes()


def block_name(b: SignedBlock) -> str:
    """``block <n> (<multihash>)``: how a problem names a 0.39 block (``store.read.Problem``)."""
    return f"block {b.stored.block.sequence_number} ({b.stored.hash})"


def signature_name(b: SignedBlock) -> str:
    return layout.signature_file(b.stored.hash)


def signed_blocks(ws: Workspace, root: Path, blocks: list[StoredBlock],
                  verified: VerifiedSignatures | None = None) -> list[SignedBlock]:
    """``blocks`` (in the order given) with their signers, each signature checked;
    ``verified``: the signatures found valid before, taken as valid without the Ed25519
    check (and added to when a check passes; see the module doc)."""
    trusted = set(ws.trusted_keys())
    folder = str(root)  # a string: paths are joined per block, pathlib costs more
    out = []
    for stored in blocks:
        try:
            with open(f"{folder}/{layout.signature_file(stored.hash)}", "rb") as f:
                doc: bytes | None = f.read()
        except FileNotFoundError:
            doc = None
        status, signer = check_signature(stored.hash.to_bytes(), doc, trusted, verified)
        out.append(SignedBlock(stored, signer, status is SignatureStatus.INVALID))
    return out


def authors(ws: Workspace, name: str, oldest_first: list[SignedBlock]) -> list[BlockAuthor]:
    """Each block's signer and status, against the dataset's pins."""
    return authorship(ws, oldest_first, pinned_keys(ws, name))


def signers_newest_first(ws: Workspace, name: str, newest_first: list[SignedBlock]) -> list[Signer]:
    """Per block (newest first) its signer, as ``coord log`` shows it."""
    return block_signers(ws, name, newest_first)
