"""A query receipt checked straight from a repository (``coord verify-receipt FILE --from
REPO``): its inputs are pulled from there into a temporary workspace, deleted afterwards, and
the receipt is checked in it as ``receipt.verify_receipt`` checks one in any workspace.

Invariants:
- Nothing is pulled into the user's workspace. The temporary one stores datasets in the
  receipt's ODF version and judges signers as the user's does: the same trusted keys (the
  user's own key among them) and the same ``trust.require``; each input's pull pins the
  signers of its blocks, as a first ``coord pull`` would, so a receipt signed by the inputs'
  author is accepted as it is after a pull into the user's workspace.
- The pull is the repository pull (``fetch_remote.pull_from_repository``): every block and
  slice downloaded is hashed against its name before it is parsed or installed, so a
  repository whose blocks or files were changed gives ``cannot check`` naming what failed,
  never an answer computed from them.
- Each input is pulled from the repository's dataset of the name the receipt gives it, whole
  (the block it names may be any of its chain); a repository without that dataset, or whose
  copy does not hold the block, gives ``cannot check`` naming the block and the repository.
- A receipt that is malformed or whose signature does not verify is judged before anything
  is downloaded.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import CoordError
from ..metadata.ids import DatasetRef
from ..workspace import Workspace
from ..workspace.config import OdfVersion
from .receipt import CannotCheck, Input, Verdict, holder, load_receipt, signature_holds, verify_receipt


def verify_receipt_from(ws: Workspace, data: bytes, repository: str) -> Verdict:
    """The receipt of ``data`` checked from ``repository`` (a repository's name in ``ws``, its
    URL, or a folder), trust judged as ``ws`` judges it (see the module doc)."""
    try:
        doc = load_receipt(data)
    except CoordError:
        return verify_receipt(ws, data)  # says what is wrong with it
    if not signature_holds(doc):
        return verify_receipt(ws, data)
    inputs = [Input(**given) for given in doc["inputs"]]
    with tempfile.TemporaryDirectory(prefix="coord-receipt-") as tmp:
        held = _workspace_trusting_as(ws, Path(tmp), OdfVersion(inputs[0].odf) if inputs else ws.config().odf)
        url = repository_url(ws, repository)
        try:
            for given in inputs:
                _pull(held, given, url, repository)
        except CannotCheck as e:
            return Verdict("cannot check", str(e), signer=doc["signer"], time=doc["time"])
        return verify_receipt(held, data)


def repository_url(ws: Workspace, repository: str) -> str:
    """The URL of ``repository``: given as one, a folder, or a repository's name in ``ws``."""
    from ..repository.registry import get_repository

    if "://" in repository:
        return repository.rstrip("/")
    if Path(repository).is_dir():
        return Path(repository).resolve().as_uri()
    return get_repository(ws, repository).url.rstrip("/")


def _workspace_trusting_as(ws: Workspace, root: Path, odf: OdfVersion) -> Workspace:
    held = Workspace.init(root, odf)
    config = ws.config()
    keys = [f"{ws.public_key.hex()} this workspace's owner", *config.trusted_keys]
    held.save_config(held.config().set("trustedKeys", keys).set("trust.require", config.trust.require))
    return held


def _pull(held: Workspace, given: Input, url: str, repository: str) -> None:
    """``given``'s dataset pulled from the repository at ``url`` into ``held``; ``CannotCheck``
    when it cannot be, or does not hold ``given``'s block."""
    from ..repository.fetch_remote import pull_from_repository
    from ..repository.remote import RemoteDatasetNotFound

    identity = f" ({given.id})" if given.id else ""
    missing = f"{repository} holds no block {given.block} of {given.name}{identity}"
    try:
        pull_from_repository(held, DatasetRef.parse(f"{url}/{given.name}"), as_name=given.name)
    except RemoteDatasetNotFound:
        raise CannotCheck(f"{missing}: it has no dataset {given.name}; check the repository, or "
                          "pull the dataset from where the receipt's author publishes it") from None
    except (CoordError, OSError) as e:
        raise CannotCheck(f"{repository}/{given.name}: {e}") from None
    try:
        holder(held, given)
    except CannotCheck:
        raise CannotCheck(f"{missing}: its copy of {given.name} does not reach that block; check "
                          "from where the receipt's author publishes it") from None
