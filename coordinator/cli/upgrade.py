"""``coord upgrade``: ODF 0.18 datasets written as current-ODF (0.39) dataset folders in the
reference's layout (``build.upgrade``); the workspace is only read."""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import CoordError
from .context import complete_dataset, workspace
from .output import Output, count


@click.command()
@click.argument("datasets", nargs=-1, required=True, shell_complete=complete_dataset)
@click.option("--into", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The folder that receives one dataset folder per DATASET, named by it.")
@click.option("--recursive", "-r", is_flag=True,
              help="Upgrade first the inputs DATASET reads that INTO does not hold yet.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: per dataset its id, folder, head and the 0.18 -> "
                                      "0.39 block mapping.")
@click.pass_context
def upgrade(ctx: click.Context, datasets: tuple[str, ...], into: Path, recursive: bool,
            output: str) -> None:
    """Write each ODF 0.18 DATASET as a current-ODF dataset in INTO/DATASET.

    A new chain: every block hash changes (the new chain's attachment names the 0.18 head and
    maps each 0.18 block to its new one). An existing INTO/DATASET is refused. A derivative
    names its inputs by their upgrades in INTO: upgrade them first, or give -r.
    """
    from ..build.upgrade import ORIGIN_PATH, upgrade_dataset, upgrade_order
    from ..errors import Invalid
    from ..workspace.config import OdfVersion

    ws = workspace(ctx)
    current = next((name for name in datasets if ws.odf_of(name) is OdfVersion.V039), None)
    if current is not None:
        raise Invalid(f"{current} is already current ODF (0.39), in the reference's layout: "
                      "nothing to upgrade (coord push copies it to a folder or S3 repository)")
    show = Output()
    names = upgrade_order(ws, list(datasets), into, recursive)
    done, failed = [], []
    for name in names:
        try:
            u = upgrade_dataset(ws, name, into)
        except CoordError as e:
            if len(names) == 1:
                raise
            failed.append((name, str(e)))
            continue
        done.append({"dataset": name, "id": str(u.state.id), "folder": str(u.root),
                     "head": str(u.state.head), "blocks": len(u.state.blocks),
                     "records": u.records,
                     "origin": [{"odf018": old.hex(), "odf039": str(new)} for old, new in u.origin]})
        if output == "text":
            feed = ("; the folder holds no File Feed source, only the updates its blocks took: "
                    "add the manifest (coord add --replace) in the workspace that holds it to go "
                    "on from them") if u.feed else ""
            show.line(f"{name}: {u.state.id} in {u.root}: {count(len(u.state.blocks), 'block')}, "
                      f"{count(u.records, 'record')}; the hashes are new ({ORIGIN_PATH} maps "
                      f"the 0.18 blocks to them){feed}")
    if output == "json":
        show.json(done)
    if failed:
        show.failures(failed, len(names), 0)
        ctx.exit(1)
