"""``coord list``: the datasets of the workspace, one row each, from their metadata only."""
from __future__ import annotations

import click

from ..metadata.timestamps import format_timestamp
from .context import workspace
from .output import Output, short
from .status import reason_codes, short_status


@click.command("list")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="json: the head as a full hash, the status as reason codes (see coord status -o json).")
@click.pass_context
def list_(ctx: click.Context, output: str) -> None:
    """List the datasets of the workspace (status: see coord status)."""
    from ..build import status as status_service
    from ..store.overview import CurrentDatasets, overview
    from ..workspace.graph import DatasetGraph

    ws = workspace(ctx)
    current = CurrentDatasets(ws)  # one read of each chain, for its row and for its readers' status
    graph = DatasetGraph(ws, current=current.inputs)
    rows: list[tuple[str, ...]] = []
    records: list[dict] = []
    for ds in ws.datasets():
        s = overview(ws, ds.id, current, None if current.holds(ds.id) else graph.state(ds.id))
        st = status_service.dataset_status(ws, ds, graph, current)
        wm = format_timestamp(s.watermark) if s.watermark else None
        records.append({"id": s.id, "odf": str(s.odf), "kind": s.kind, "head": s.head,
                        "blocks": s.num_blocks, "records": s.num_records, "watermark": wm,
                        "upToDate": st.up_to_date, "reasons": reason_codes(st)})
        rows.append((s.id, s.kind, short_head(s.head), str(s.num_blocks), f"{s.num_records:,}",
                     wm or "-", str(s.odf), short_status(st)))
    if output == "json":
        Output().json(records)
    else:
        # the version before the status, so the columns 0.18 scripts cut by position stay put
        Output().columns(("dataset", "kind", "head", "blocks", "records", "watermark", "odf", "status"),
                         rows)


def short_head(head: str | None) -> str:
    """A head as ``coord list`` shows it: 12 hex digits (of a 0.39 multihash, the digest's)."""
    if head is None:
        return short(None)
    return head.removeprefix("f1620")[:12]
