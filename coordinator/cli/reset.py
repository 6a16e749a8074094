"""``coord reset``: a dataset's head moved back to an earlier block."""
from __future__ import annotations

import click

from .context import complete_dataset, writable_workspace
from .output import Output


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.argument("block")
@click.pass_context
def reset(ctx: click.Context, dataset: str, block: str) -> None:
    """Move the head of DATASET back to BLOCK (a hash or its prefix); later blocks go."""
    from ..workspace import catalog
    from ..workspace.config import OdfVersion

    ws = writable_workspace(ctx)
    if ws.odf_of(dataset) is OdfVersion.V039:
        from ..store.dataset import reset_current

        Output().line(f"{dataset} head is now {reset_current(ws, dataset, block)}")
        return
    h = catalog.reset_dataset(ws, dataset, block)
    Output().line(f"{dataset} head is now {h.hex()}")
