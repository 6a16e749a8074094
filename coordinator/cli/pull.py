"""``coord pull``: local datasets up to date, or datasets from a repository."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..metadata.ids import DatasetRef
from .context import complete_dataset, writable_workspace
from .output import Output, literal, unnamed
from .trust import signer_line

if TYPE_CHECKING:
    from rich.progress import Progress


class _Bars:
    """The rich progress bars of one command, started by the first dataset that reports
    progress: a pull with nothing new shows none and does not import rich."""

    def __init__(self, show: Output) -> None:
        self.show = show
        self.live: Progress | None = None

    def get(self) -> Progress:
        if self.live is None:
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                       TimeRemainingColumn())
            self.live = Progress(*columns, console=self.show.console(), transient=True)
            self.live.start()
        return self.live

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()

    def echo(self, line: str) -> None:
        """A line of output, above the bars while they are shown."""
        if self.live is not None:
            self.show.line(line)
        else:
            self.show.text(line)


class _Bytes:
    """Ingest progress (bytes fetched and read) as a rich bar."""

    def __init__(self, bars: _Bars, dataset_id: str):
        self.bars, self.dataset_id, self.task = bars, dataset_id, None

    def start(self, total_bytes, description):
        self.task = self.bars.get().add_task(literal(f"{self.dataset_id}: {description}", cell=True),
                                                  total=total_bytes)

    def advance(self, n):
        if self.task is not None:
            self.bars.get().advance(self.task, n)

    def finish(self):
        if self.task is not None:
            self.bars.get().remove_task(self.task)
            self.task = None

    def __call__(self, engine_progress):  # engine progress lines while a transform runs
        if self.task is None:
            self.task = self.bars.get().add_task(self.dataset_id, total=None)
        shown = literal(f"{self.dataset_id}: {engine_progress}", cell=True)
        self.bars.get().update(self.task, description=shown)


@click.command()
@click.argument("datasets", nargs=-1, shell_complete=complete_dataset)
@click.option("--all", "all_", is_flag=True, help="Pull every dataset of the workspace.")
@click.option("-r", "--recursive", is_flag=True,
              help="Bring upstream datasets up to date first (REPO/DATASET: bring its inputs too).")
@click.option("--set-watermark", metavar="TIME", help="Advance a root dataset's watermark, no data.")
@click.option("--as", "as_name", metavar="NAME", help="Local name for a dataset pulled from a repository.")
@click.pass_context
def pull(ctx, datasets, all_, recursive, set_watermark, as_name):
    """Bring datasets up to date (ingest roots, run derivatives), or pull REPO/DATASET (or a
    dataset's URL: file:///path/ds, s3://bucket/ds, http(s)://host/path/ds, or a node's
    odf+http(s)://host/ds through the smart transfer protocol; over HTTP(S) either way with
    $COORD_TOKEN as the bearer token when set).

    A dataset that fails does not stop the others: those that depend on it are skipped, the
    failures are named at the end (each with its dataset) and the exit code is 1."""
    from ..build.pull import PullStatus, pull_datasets, pull_remote
    from ..metadata.timestamps import parse_timestamp

    ws = writable_workspace(ctx)
    refs = [DatasetRef.parse(d) for d in datasets]
    remote = [r for r in refs if r.is_remote]
    local = [r.dataset_id for r in refs if not r.is_remote]
    if all_:
        local = [d.id for d in ws.datasets()]
    if not remote and not local:
        raise click.UsageError("name the datasets to pull, or use --all")
    if as_name and len(remote) != 1:
        raise click.UsageError("--as needs exactly one REPO/DATASET or URL")

    show = Output()
    bars = _Bars(show)
    outcomes: list = []

    def report(outcome) -> None:
        _print_outcome(bars, outcome.dataset_id, _worded(outcome), outcome.signers, outcome.warnings)

    try:
        for ref in remote:
            outcomes += pull_remote(ws, ref, as_name=as_name, recursive=recursive, report=report)
        if local:
            outcomes += pull_datasets(
                ws, local, recursive=recursive or all_,
                set_watermark=parse_timestamp(set_watermark) if set_watermark else None,
                progress_factory=_progress_factory(show, bars),
                report=report,
            )
    finally:
        bars.stop()
    failed = [o for o in outcomes if o.status is PullStatus.FAILED]
    if failed:
        if ctx.find_root().obj.get("debug"):
            import traceback

            for o in failed:
                traceback.print_exception(o.error)
        show.failures([(o.dataset_id, o.message) for o in failed], len(outcomes),
                      sum(o.status is PullStatus.SKIPPED for o in outcomes))
        ctx.exit(1)


class _Details:
    """With ``-v``: each step of a dataset's pull (what is read, the engine's lines) on stderr."""

    def __init__(self, show: Output, dataset_id: str):
        self.show, self.dataset_id = show, dataset_id

    def start(self, total_bytes, description):
        size = f" ({total_bytes:,} bytes)" if total_bytes else ""
        self.show.detail(f"{self.dataset_id}: {description}{size}")

    def advance(self, n):
        pass

    def finish(self):
        pass

    def __call__(self, engine_progress):
        self.show.detail(f"{self.dataset_id}: {engine_progress}")


def _progress_factory(show: Output, bars: _Bars):
    if show.verbose:
        return lambda ds: _Details(show, ds)
    # bars only on a terminal: elsewhere rich would draw nothing, yet cost its import
    return (lambda ds: _Bytes(bars, ds)) if sys.stdout.isatty() and not show.quiet else None


def _worded(outcome) -> str:
    from ..build.pull import PullStatus

    if outcome.status is PullStatus.FAILED:
        return f"failed: {unnamed(outcome.dataset_id, outcome.message)}"
    return outcome.message


def _print_outcome(bars: _Bars, dataset_id: str, message: str, signers, warnings=()) -> None:
    bars.echo(f"{dataset_id}: {message}")
    for s in signers:
        bars.echo(f"  {signer_line(s)}")
    for w in warnings:
        bars.show.warning(f"{dataset_id}: {w}")
