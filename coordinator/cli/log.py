"""``coord log``: a dataset's metadata chain, and with ``--builds`` the catalog of its builds.

``transform/builds.py`` decides which input blocks and query made each block; this module only
words it. Neither view imports Arrow, so the command answers at once.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..metadata.timestamps import format_timestamp
from .context import complete_dataset, workspace
from .output import Output, count, short
from .trust import signed_words

if TYPE_CHECKING:
    from ..transform.builds import Build


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml")
@click.option("--builds", is_flag=True,
              help="Per block a derivative computed: the input blocks and the query that made it.")
@click.pass_context
def log(ctx: click.Context, dataset: str, output: str, builds: bool) -> None:
    """Show the metadata chain of DATASET, newest block first."""
    from ..metadata.yaml_codec import render, to_dict

    show = Output(output)
    if builds:
        from ..transform.builds import builds as build_catalog

        ws = workspace(ctx)
        _show_builds(show, build_catalog(ws, ws.dataset(dataset)))
        return
    from ..trust.authorship import block_signers

    ws = workspace(ctx)
    chain = list(ws.dataset(dataset).chain())
    signers = block_signers(ws, dataset, chain)
    if show.format == "json":
        docs = [dict(to_dict(c.block), signer=s.key.hex() if s.key else None, authorship=s.status.value)
                for c, s in zip(chain, signers, strict=True)]
        show.line(json.dumps(docs, indent=2))  # through the console, as the YAML
        return
    for c, s in zip(chain, signers, strict=True):
        show.line(f"# {signed_words(s)}\n" + render(c.block), end="")
        show.line("---")


def _show_builds(show: Output, builds: list[Build]) -> None:
    """Per executed block, the input blocks and query behind it."""
    if show.format == "json":
        show.json([_build_json(b) for b in builds])
        return
    for b in builds:
        late = f", {b.late_rows:,} dropped as late" if b.late_rows else ""
        show.line(f"{short(b.block_hash)} {format_timestamp(b.system_time)} "
                  f"+{b.num_records:,} records{late}, query of block {short(b.query_block)}")
        for u in b.inputs:
            blocks = " ".join(short(h) for h in u.blocks) or "-"
            show.line(f"  {u.dataset_id} {u.interval}: {count(len(u.blocks), 'block')} "
                      f"({u.num_records:,} records) {blocks}")


def _build_json(b: Build) -> dict:
    from ..metadata.yaml_codec import to_dict

    return {
        "block": b.block_hash.hex(),
        "systemTime": format_timestamp(b.system_time),
        "numRecords": b.num_records,
        "lateRows": b.late_rows,
        "queryBlock": b.query_block.hex(),
        "transform": to_dict(b.transform),
        "inputs": [{"dataset": u.dataset_id, "interval": str(u.interval), "numRecords": u.num_records,
                    "blocks": [h.hex() for h in u.blocks]} for u in b.inputs],
    }
