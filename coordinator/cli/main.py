"""The ``coord`` command line. Thin: parses arguments, calls services, renders results.

Errors end as one line on stderr: ``coord: error: ...`` (exit 1) for a ``CoordError`` or the
machine's, ``coord: internal error: ...`` (exit 70) for a bug; ``--debug`` adds the traceback.
Every module a command needs is imported by that command: loading the group (what ``coord
--help`` does) imports click and the command modules only, and the commands that read only
metadata (``status``, ``list``, ``log``) never import Arrow, JSON Schema or the engine.
"""
from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path

import click

from ..errors import CoordError
from ..metadata.timestamps import format_timestamp
from .console import TextTable, err, out, short, writable_workspace
from .console import workspace as _ws
from .lineage import lineage_
from .provenance import provenance_
from .publish import publish_
from .pull import pull
from .serve import serve
from .sharing import register as register_sharing
from .sql import sql
from .status import print_builds, short_status, status_
from .system import system
from .trust import trust_


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--workspace", "-w", type=click.Path(file_okay=False), envvar="COORD_WORKSPACE",
              help="Workspace folder (default: the nearest one with a .coord folder).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, debug: bool) -> None:
    """coord: datasets as verifiable, hash-linked event logs (Open Data Fabric)."""
    ctx.obj = {"workspace": workspace, "debug": debug}


@cli.command()
@click.argument("path", type=click.Path(file_okay=False), default=".")
def init(path: str) -> None:
    """Create a workspace (and its signing key) in PATH."""
    from ..workspace import Workspace

    ws = Workspace.init(Path(path))
    out.print(f"Initialised workspace in {ws.meta}")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--replace", is_flag=True, help="Change the definition of datasets that exist.")
@click.pass_context
def add(ctx: click.Context, paths: tuple[str, ...], replace: bool) -> None:
    """Add datasets from manifest files or folders of them."""
    from ..engine.session import EngineOnDemand, engine_reads
    from ..metadata.manifest import load_manifests
    from ..workspace import catalog
    from ..workspace.graph import inputs_of

    ws = writable_workspace(ctx)
    snapshots = load_manifests(paths)
    with ExitStack() as stack:
        def readable() -> list[str]:  # a changed query is validated against its inputs, old and new
            return engine_reads(ws, [s.id for s in snapshots if ws.dataset(s.id).exists()],
                                proposed={s.id: inputs_of(s) for s in snapshots})

        engine = EngineOnDemand(ws, stack, readable)

        def check_change(ds, snapshot, current):
            from ..transform.evolution import check_query_change, transform_changed  # needs gRPC

            if transform_changed(snapshot, current):
                check_query_change(engine.get(), ws, ds, snapshot, current)

        for result in catalog.add_datasets(ws, snapshots, replace=replace, check_change=check_change):
            out.print(f"{result.action:9} {result.dataset_id} {short(result.block_hash)}")


@cli.command("list")
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List the datasets of the workspace (status: see coord status)."""
    from ..build import status as status_service
    from ..workspace.graph import DatasetGraph

    ws = _ws(ctx)
    graph = DatasetGraph(ws)  # one read of each chain, for its row and for its readers' status
    table = TextTable("dataset", "kind", "head", "blocks", "records", "watermark", "status")
    for ds in ws.datasets():
        s = graph.state(ds.id)
        wm = format_timestamp(s.watermark) if s.watermark else "-"
        table.add_row(s.id, s.kind, short(s.head), str(s.num_blocks), f"{s.num_records:,}", wm,
                      short_status(status_service.dataset_status(ws, ds, graph)))
    table.print()


@cli.command()
@click.argument("dataset")
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml")
@click.option("--builds", is_flag=True,
              help="Per block a derivative computed: the input blocks and the query that made it.")
@click.pass_context
def log(ctx: click.Context, dataset: str, output: str, builds: bool) -> None:
    """Show the metadata chain of DATASET, newest block first."""
    from ..metadata.yaml_codec import render, to_dict

    if builds:
        from ..transform.builds import builds as build_catalog

        ws = _ws(ctx)
        print_builds(build_catalog(ws, ws.dataset(dataset)), output)
        return
    chain = list(_ws(ctx).dataset(dataset).chain())
    if output == "json":
        docs = [dict(to_dict(c.block), signature=c.signature.value) for c in chain]
        out.print(json.dumps(docs, indent=2), markup=False)
        return
    for c in chain:
        out.print(f"# {c.signature.value}\n" + render(c.block), markup=False, end="")
        out.print("---", markup=False)


@cli.command()
@click.argument("dataset")
@click.option("-n", "num", default=10, show_default=True, help="Number of records.")
@click.option("--output", "-o", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="json: a list of records; csv: with a header line.")
@click.option("--as-at", "as_at", metavar="TIME|BLOCK",
              help="The records as the dataset held them at that system time (RFC 3339) or block.")
@click.pass_context
def tail(ctx: click.Context, dataset: str, num: int, output: str, as_at: str | None) -> None:
    """Show the last records of DATASET."""
    import pyarrow.csv as pacsv
    from rich.table import Table

    from ..query.tail import json_value
    from ..query.tail import tail as last_records

    data = last_records(_ws(ctx).dataset(dataset), num, as_at)
    if output == "json":
        click.echo(json.dumps(data.to_pylist(), indent=2, default=json_value))
        return
    if output == "csv":
        sys.stdout.flush()
        pacsv.write_csv(data, sys.stdout.buffer)
        return
    table = Table(*data.column_names, box=None)
    for row in data.to_pylist():
        table.add_row(*("" if v is None else str(v) for v in row.values()))
    out.print(table)


@cli.command()
@click.argument("dataset")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, dataset: str, yes: bool) -> None:
    """Delete DATASET from the workspace."""
    from ..workspace import catalog

    if not yes and sys.stdin.isatty():
        click.confirm(f"Delete {dataset} and all its data?", abort=True)
    catalog.delete_dataset(writable_workspace(ctx), dataset)
    out.print(f"deleted {dataset}")


@cli.command()
@click.argument("dataset")
@click.argument("block")
@click.pass_context
def reset(ctx: click.Context, dataset: str, block: str) -> None:
    """Move the head of DATASET back to BLOCK (a hash or its prefix); later blocks go."""
    from ..workspace import catalog

    h = catalog.reset_dataset(writable_workspace(ctx), dataset, block)
    out.print(f"{dataset} head is now {h.hex()}")


@cli.group()
def config() -> None:
    """Read or change the workspace settings (.coord/config.yaml), e.g. engine.runtime."""


@config.command("get")
@click.argument("key", required=False)
@click.pass_context
def config_get(ctx: click.Context, key: str | None) -> None:
    """Print a setting (dotted KEY such as engine.runtime), or all of them."""
    import yaml

    value = _ws(ctx).config().get(key)
    text = yaml.safe_dump(value, sort_keys=False).strip() if isinstance(value, (dict, list)) else str(value)
    out.print(text, markup=False)


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str) -> None:
    """Change a setting: VALUE is read as YAML (true, 2, local[2], {a: b})."""
    import yaml

    ws = _ws(ctx)
    cfg = ws.config().set(key, yaml.safe_load(value), where=str(ws.config_path))
    ws.save_config(cfg)
    out.print(f"{key} = {cfg.get(key)}")


@cli.group()
def block() -> None:
    """Work with single metadata blocks."""


@block.command("hash")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def block_hash(file: str) -> None:
    """Print the blockHash of a MetadataBlock given as a YAML manifest."""
    from ..metadata.block_hash import compute_hash
    from ..metadata.manifest import load_manifest
    from ..metadata.objects import MetadataBlock

    obj = load_manifest(file, unsealed=True)
    if not isinstance(obj, MetadataBlock):
        raise click.UsageError(f"{file} holds a {type(obj).__name__}, not a MetadataBlock")
    out.print(compute_hash(obj).hex())


cli.add_command(pull)
cli.add_command(serve)
cli.add_command(lineage_)
cli.add_command(provenance_)
cli.add_command(sql)
cli.add_command(trust_)
cli.add_command(status_)
cli.add_command(system)
cli.add_command(publish_)
register_sharing(cli)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv or bool(os.environ.get("COORD_DEBUG"))
    try:
        cli.main(args=argv, prog_name="coord", standalone_mode=False)
    except click.exceptions.Abort:
        err.print("coord: aborted")
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err.print("coord: interrupted")
        sys.exit(130)
    except Exception as e:  # every error ends as one line unless --debug
        if debug:
            import traceback

            traceback.print_exc()
        if _is_users(e):
            err.print(f"coord: error: {e}", markup=False)
            sys.exit(1)
        err.print(f"coord: internal error: {type(e).__name__}: {e} (run with --debug for the traceback)",
                  markup=False)
        sys.exit(INTERNAL_ERROR)


INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug of ours, not the user's input


def _is_users(e: Exception) -> bool:
    """A refusal the user can act on (ours, or the machine's or the network's), not a bug."""
    if isinstance(e, CoordError | OSError):
        return True
    boto = sys.modules.get("botocore.exceptions")  # S3 unreachable, bad credentials
    return boto is not None and isinstance(e, boto.BotoCoreError | boto.ClientError)

