"""``coord ingest``: push files (or stdin) into a current-ODF root through a push source."""
from __future__ import annotations

import shutil
import sys
from contextlib import ExitStack
from pathlib import Path

import click

from .context import complete_dataset, writable_workspace
from .output import Output

_FORMATS = ("csv", "json", "ndjson", "geojson", "ndgeojson", "parquet")


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the data from standard input.")
@click.option("--input-format", type=click.Choice(_FORMATS, case_sensitive=False),
              help="The data's format, when not the push source's read format.")
@click.option("--source-name", metavar="NAME",
              help="The push source to ingest through (needed when the dataset has several).")
@click.option("--event-time", metavar="TIME",
              help="Event time of records without one of their own (RFC 3339; default: now).")
@click.option("-r", "--recursive", is_flag=True,
              help="Then bring the derivatives downstream of the dataset up to date.")
@click.pass_context
def ingest(ctx, dataset, files, from_stdin, input_format, source_name, event_time, recursive):
    """Push data into a root dataset (ODF 0.39): each file is one block, or none if nothing new."""
    from ..build.pull import PullStatus, pull_datasets
    from ..engine.session import EngineOnDemand, engine_reads
    from ..ingest.push import InputFormat, PushedInput, push
    from ..metadata.timestamps import parse_timestamp
    from ..workspace.runs import run_folder

    if from_stdin == bool(files):
        raise click.UsageError("give the files to ingest, or --stdin")
    ws = writable_workspace(ctx)
    when = parse_timestamp(event_time) if event_time else None
    show = Output()
    with ExitStack() as stack:
        inputs = [PushedInput(Path(f), f) for f in files]
        if from_stdin:  # copied first: the read steps need a file they can seek in
            scratch = stack.enter_context(run_folder(ws.run_dir, f"stdin-{dataset}"))
            with open(scratch / "stdin", "wb") as out:
                shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
            inputs = [PushedInput(scratch / "stdin", "<stdin>")]
        engine = EngineOnDemand(ws, stack, lambda: engine_reads(ws, [dataset]))
        result = push(ws, dataset, inputs, source_name=source_name,
                      input_format=InputFormat(input_format.lower()) if input_format else None,
                      event_time=when, engine=engine.get)
    show.text(f"{dataset}: {result.message}")
    if result.behind is not None:
        show.warning(f"{dataset}: {result.behind.words(dataset)}")
    if not recursive:
        return
    from ..store.overview import CurrentDatasets
    from ..workspace.graph import DatasetGraph

    edges = DatasetGraph(ws, current=CurrentDatasets(ws).inputs).downstream(dataset)
    readers = sorted({d for edge in edges for d in edge} - {dataset})
    outcomes = pull_datasets(ws, readers, report=lambda o: show.text(f"{o.dataset_id}: {o.message}"))
    failed = [o for o in outcomes if o.status is PullStatus.FAILED]
    if failed:
        show.failures([(o.dataset_id, o.message) for o in failed], len(outcomes),
                      sum(o.status is PullStatus.SKIPPED for o in outcomes))
        ctx.exit(1)
