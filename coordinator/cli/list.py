"""``coord list``: the datasets of the workspace, one row each, from their metadata only."""
from __future__ import annotations

import click

from ..metadata.timestamps import format_timestamp
from .context import workspace
from .output import Output, short
from .status import short_status


@click.command("list")
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List the datasets of the workspace (status: see coord status)."""
    from ..build import status as status_service
    from ..workspace.graph import DatasetGraph

    ws = workspace(ctx)
    graph = DatasetGraph(ws)  # one read of each chain, for its row and for its readers' status
    rows: list[tuple[str, ...]] = []
    for ds in ws.datasets():
        s = graph.state(ds.id)
        wm = format_timestamp(s.watermark) if s.watermark else "-"
        rows.append((s.id, s.kind, short(s.head), str(s.num_blocks), f"{s.num_records:,}", wm,
                     short_status(status_service.dataset_status(ws, ds, graph))))
    Output().columns(("dataset", "kind", "head", "blocks", "records", "watermark", "status"), rows)
