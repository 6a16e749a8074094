"""``coord trust``: the keys whose signatures this workspace accepts, and how signers read.

``signer_line`` words a signer the same way in ``coord pull`` and ``coord verify``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .context import workspace
from .output import Output, count

if TYPE_CHECKING:
    from ..trust.authorship import Signer


def signer_line(s: Signer) -> str:
    """``N blocks signed by KEY (status)``: one signer of a pull or a dataset."""
    return f"{count(s.blocks, 'block')} {signed_words(s, hint=True)}"


def signed_words(s: Signer, hint: bool = False) -> str:
    """``signed by KEY (trusted: NAME)``, ``unsigned``...: how a signer reads for this workspace
    (``coord log`` says it per block); ``hint``: say how to trust a pinned key."""
    from ..trust.authorship import Authorship

    if s.key is None:
        history = " (older than any signature: written by a tool that does not sign)"
        return "unsigned" + (history if s.status is Authorship.UNSIGNED_HISTORY else "")
    key = s.key.hex()
    status = {
        Authorship.TRUSTED: f"trusted: {s.name}" if s.name else "trusted",
        Authorship.PINNED: "pinned for this dataset, not trusted"
                           + (f"; to trust its owner: coord trust add {key} --name WHO" if hint else ""),
        Authorship.UNKNOWN: "unknown key",
        Authorship.CHANGED: f"CHANGED: the dataset's pinned key is {', '.join(k.hex() for k in s.pinned)}",
    }[s.status]
    return f"signed by {key} ({status})"


@click.group("trust")
def trust_() -> None:
    """Keys whose signatures are trusted, and the keys pinned per dataset."""


@trust_.command("list")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def trust_list(ctx: click.Context, output: str) -> None:
    """List the trusted keys and, per dataset, the keys pinned when it was first pulled."""
    from ..trust import authorship

    ws = workspace(ctx)
    show = Output()
    require, trusted, pins = authorship.policy(ws).value, ws.trusted_key_names(), authorship.all_pins(ws)
    if output == "json":
        show.json({"require": require,
                   "trusted": [{"key": k.hex(), "name": n or None} for k, n in trusted.items()],
                   "pinned": {d: [k.hex() for k in keys] for d, keys in pins.items()}})
        return
    show.line(f"trusted keys (trust.require: {require}):")
    for key, name in trusted.items():
        show.line(f"  {key.hex()}  {name}".rstrip())
    if pins:
        show.line("pinned keys:")
    for dataset_id, keys in pins.items():
        for key in keys:
            show.line(f"  {key.hex()}  {dataset_id}")


@trust_.command("add")
@click.argument("key")
@click.option("--name", default="", metavar="WHO", help="Who owns the key (shown by pull and verify).")
@click.option("--dataset", metavar="DS", help="Accept KEY as a signer of DS only (a changed key).")
@click.pass_context
def trust_add(ctx: click.Context, key: str, name: str, dataset: str | None) -> None:
    """Trust KEY (64 hex digits, as pull and verify print it) for every dataset, or pin it for one."""
    from ..trust import authorship

    ws = workspace(ctx)
    show = Output()
    if dataset:
        if name:
            raise click.UsageError("--name names a trusted key; a key pinned with --dataset has none")
        k = authorship.pin_key(ws, dataset, key)
        show.line(f"pinned {k.hex()} for {dataset}")
    else:
        k = authorship.add_trusted(ws, key, name)
        show.line(f"trusted {k.hex()}{f' ({name})' if name else ''}")


@trust_.command("remove")
@click.argument("key")
@click.option("--dataset", metavar="DS", help="Unpin KEY for DS instead.")
@click.pass_context
def trust_remove(ctx: click.Context, key: str, dataset: str | None) -> None:
    """Stop trusting KEY (or, with --dataset, unpin it for that dataset)."""
    from ..trust import authorship

    ws = workspace(ctx)
    show = Output()
    if dataset:
        k = authorship.unpin_key(ws, dataset, key)
        show.line(f"unpinned {k.hex()} for {dataset}")
    else:
        k = authorship.remove_trusted(ws, key)
        show.line(f"no longer trusted: {k.hex()}")
