"""``coord pull``: local datasets up to date, or datasets from a repository."""
from __future__ import annotations

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from ..metadata.ids import DatasetRef
from ..metadata.timefmt import parse_timestamp
from .console import out, writable_workspace
from .trust import signer_line


class _Bytes:
    """Ingest progress (bytes fetched and read) as a rich bar."""

    def __init__(self, bars: Progress, dataset_id: str):
        self.bars, self.dataset_id, self.task = bars, dataset_id, None

    def start(self, total_bytes, description):
        self.task = self.bars.add_task(f"{self.dataset_id}: {description}", total=total_bytes)

    def advance(self, n):
        if self.task is not None:
            self.bars.advance(self.task, n)

    def finish(self):
        if self.task is not None:
            self.bars.remove_task(self.task)
            self.task = None

    def __call__(self, engine_progress):  # engine progress lines while a transform runs
        if self.task is None:
            self.task = self.bars.add_task(self.dataset_id, total=None)
        self.bars.update(self.task, description=f"{self.dataset_id}: {engine_progress}")


@click.command()
@click.argument("datasets", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Pull every dataset of the workspace.")
@click.option("-r", "--recursive", is_flag=True, help="Bring upstream datasets up to date first.")
@click.option("--set-watermark", metavar="TIME", help="Advance a root dataset's watermark, no data.")
@click.option("--as", "as_name", metavar="NAME", help="Local name for a dataset pulled from a repository.")
@click.pass_context
def pull(ctx, datasets, all_, recursive, set_watermark, as_name):
    """Bring datasets up to date (ingest roots, run derivatives), or pull REPO/DATASET."""
    from ..pull import PullOutcome, pull_datasets

    ws = writable_workspace(ctx)
    refs = [DatasetRef.parse(d) for d in datasets]
    remote = [r for r in refs if r.repository]
    local = [r.dataset_id for r in refs if not r.repository]
    if all_:
        local = [d.id for d in ws.datasets()]
    if not remote and not local:
        raise click.UsageError("name the datasets to pull, or use --all")
    if as_name and len(remote) != 1:
        raise click.UsageError("--as needs exactly one REPO/DATASET")

    for ref in remote:
        from ..repository import pull_from_repository

        result = pull_from_repository(ws, ref, as_name=as_name)
        _print_outcome(result.dataset_id, result.message, result.signers)
    if not local:
        return

    def report(outcome: PullOutcome) -> None:
        _print_outcome(outcome.dataset_id, outcome.message, outcome.signers)

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out, transient=True, disable=not out.is_terminal) as bars:
        pull_datasets(
            ws, local, recursive=recursive or all_,
            set_watermark=parse_timestamp(set_watermark) if set_watermark else None,
            progress_factory=lambda dataset_id: _Bytes(bars, dataset_id),
            report=report,
        )


def _print_outcome(dataset_id: str, message: str, signers) -> None:
    out.print(f"{dataset_id}: {message}", markup=False)
    for s in signers:
        out.print(f"  {signer_line(s)}", markup=False)
