"""``coord push``: datasets' new blocks and files uploaded to a repository."""
from __future__ import annotations

import click

from .context import complete_dataset, workspace
from .output import Output, count, unnamed


@click.command()
@click.argument("datasets", nargs=-1, shell_complete=complete_dataset)
@click.option("--to", "to", metavar="REPO[/NAME]",
              help="Where to push (default: where each went last); with several datasets, a REPO. "
                   "odf+http(s)://host/NAME: a node, through the smart transfer protocol "
                   "($COORD_TOKEN as its token).")
@click.option("--all", "all_", is_flag=True,
              help="Every dataset pushed before (with --to: every dataset of the workspace).")
@click.option("-r", "--recursive", is_flag=True, help="Push the datasets' inputs too, inputs first.")
@click.option("--repair", is_flag=True,
              help="Also read back every file the repository has and upload again those that differ.")
@click.pass_context
def push(ctx: click.Context, datasets: tuple[str, ...], to: str | None, all_: bool, recursive: bool,
         repair: bool) -> None:
    """Upload DATASETS' new blocks and files to a repository.

    A dataset that fails does not stop the others: those that read it are skipped, the
    failures are named at the end and the exit code is 1."""
    from ..repository import PushStatus, push_datasets
    from ..repository.registry import remembered

    ws = workspace(ctx)
    ids = list(datasets)
    if all_:
        ids = [d.id for d in ws.datasets() if to or remembered(ws, d.id, "push") is not None]
        if not ids:
            raise click.UsageError("no dataset has been pushed before: say where with --to REPO")
    if not ids:
        raise click.UsageError("name the datasets to push, or use --all")
    if to and "/" in to and (len(ids) > 1 or recursive):
        raise click.UsageError("--to REPO/NAME names one dataset: use --to REPO to push several")

    show = Output()
    if len(ids) == 1 and not recursive:  # one dataset: its error is the command's
        from ..repository import push_dataset

        show.line(_worded(push_dataset(ws, ids[0], to, progress=show.progress(), repair=repair)))
        return

    def report(outcome) -> None:
        message = _worded(outcome.result) if outcome.result else outcome.message
        failed = "failed: " if outcome.status is PushStatus.FAILED else ""
        show.line(f"{outcome.dataset_id}: {failed}{unnamed(outcome.dataset_id, message)}")

    outcomes = push_datasets(ws, ids, to, recursive=recursive, repair=repair,
                             progress=lambda _: show.progress(), report=report)
    failed = [(o.dataset_id, o.message) for o in outcomes if o.status is PushStatus.FAILED]
    if failed:
        show.failures(failed, len(outcomes), sum(o.status is PushStatus.SKIPPED for o in outcomes))
        ctx.exit(1)


def _worded(result) -> str:
    mb = f" ({count(result.files, 'file')}, {result.bytes / 1e6:,.1f} MB)" if result.files else ""
    return result.message + mb
