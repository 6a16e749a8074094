"""Query receipts on the command line: ``coord sql --receipt FILE`` (``answer_with_receipt``)
and ``coord verify-receipt FILE`` (``coordinator/query/receipt.py``, ``schemas/RECEIPT.md``)."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .context import workspace
from .output import Output

if TYPE_CHECKING:
    import pyarrow as pa

    from ..query.receipt import Verdict
    from ..query.sql import AsAt
    from ..workspace import Workspace


def answer_with_receipt(ws: Workspace, script: str, as_at: AsAt | None, as_of: datetime | None,
                        target: Path, file: str | None) -> pa.Table:
    """The query's answer, its receipt written to ``target`` whole (or nothing, if refused)."""
    from ..query.receipt import make_receipt, receipt_bytes
    from ..query.sql import SqlError

    try:
        table, doc = make_receipt(ws, script, as_at, as_of)
    except SqlError as e:
        raise type(e)(f"{file}: {e}") if file else e from None
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(receipt_bytes(doc))
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    rows = doc["answer"]["rowCount"]
    Output().note(f"receipt of the answer ({rows:,} row{'s' if rows != 1 else ''}, "
                  f"{doc['answer']['hash']}) written to {target}")
    return table


@click.command("verify-receipt")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: the verdict as one object (outcome, reason, signer, inputs, differences).")
@click.option("--from", "repository", metavar="REPO",
              help="Read the inputs from this repository (its name, URL or folder) instead of this "
                   "workspace's datasets: pulled into a temporary workspace, deleted afterwards.")
@click.pass_context
def verify_receipt(ctx: click.Context, file: str, output: str, repository: str | None) -> None:
    """Check a query receipt (coord sql --receipt): its signature, then the query run again at
    exactly the blocks it names, from this workspace's datasets (or a repository's), offline.

    \b
    It says one of:
      confirmed          the query gives the receipt's answer at those blocks (exit 0)
      different answer   it gives another; the first rows that differ are shown (exit 1)
      cannot check       why: a block this workspace does not hold, a signature that does
                         not verify, a signer it does not trust (exit 1)
    An input may be a dataset pulled from a repository, under any name: the block is found.
      coord verify-receipt answer.receipt.json
      coord verify-receipt answer.receipt.json --from s3://bucket/datasets
    """
    data = Path(file).read_bytes()
    if repository is None:
        from ..query.receipt import verify_receipt as check

        verdict = check(workspace(ctx), data)
    else:
        from ..query.receipt_from import verify_receipt_from

        verdict = verify_receipt_from(workspace(ctx), data, repository)
    show = Output(output)
    if output == "json":
        show.json(verdict.to_json())
    else:
        _show(show, verdict)
    if not verdict.confirmed:
        ctx.exit(1)


def _show(show: Output, verdict: Verdict) -> None:
    show.line(f"{verdict.outcome}: {verdict.reason}")
    if verdict.signer is not None and verdict.authorship is not None:
        show.line(f"  signed by {verdict.signer} ({verdict.authorship}) at {verdict.time}")
    for given in verdict.inputs:
        here = f" (read from {given['readFrom']} here)" if given["readFrom"] != given["name"] else ""
        show.line(f"  {given['name']} at block {given['block']}{here}")
    for line in verdict.differences:
        show.line(f"  {line}")
