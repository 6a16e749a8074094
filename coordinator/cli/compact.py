"""``coord compact``: a dataset's small data files merged into larger ones, no block changed."""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .context import complete_dataset, writable_workspace
from .output import Output, count

if TYPE_CHECKING:
    from ..store.compact import CompactionResult


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--keep-originals", is_flag=True,
              help="Keep each merged slice's own file too (verify then checks both; costs the space).")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def compact(ctx: click.Context, dataset: str, keep_originals: bool, output: str) -> None:
    """Merge DATASET's slices newer than its last compaction into larger files, each
    gathering at most compaction.targetBytes of them (coord config). Every block stays as it
    is and every slice stays checkable by its hashes: coord verify --deep rebuilds each one
    from its rows; coord push sends them as they were."""
    from ..errors import Invalid
    from ..store.compact import compact as compact_dataset
    from ..store.dataset import CurrentDataset
    from ..workspace.config import OdfVersion
    from ..workspace.dataset import DatasetNotFound

    ws = writable_workspace(ctx)
    odf = ws.odf_of(dataset)
    if odf is None:
        raise DatasetNotFound(dataset)
    if odf is OdfVersion.V018:
        raise Invalid(f"{dataset} is stored in ODF 0.18, which coord compact does not merge; "
                      f"coord upgrade {dataset} makes a 0.39 copy that it does")
    result = compact_dataset(CurrentDataset(ws, dataset), ws.config().compaction.target_bytes,
                             keep=keep_originals)
    show = Output(output)
    if show.format == "json":
        show.json(_json(result))
    else:
        show.line(_worded(result))


def _worded(r: CompactionResult) -> str:
    if not r.files:
        done = f"; removed {count(r.removed, 'original')} a stopped compaction left" if r.removed else ""
        return f"{r.dataset}: nothing to compact{done}"
    kept = f", {count(r.kept, 'original')} kept" if r.kept else ""
    left = f"; {count(r.left, 'slice')} left as {'it is' if r.left == 1 else 'they are'}" if r.left else ""
    return (f"{r.dataset}: {count(r.slices, 'slice')} merged into {count(r.files, 'file')} "
            f"({_size(r.bytes_before)} -> {_size(r.bytes_after)}), "
            f"{count(r.removed, 'original')} removed{kept}{left}")


def _json(r: CompactionResult) -> dict:
    return {"dataset": r.dataset, "slices": r.slices, "files": r.files, "bytesBefore": r.bytes_before,
            "bytesAfter": r.bytes_after, "originalsRemoved": r.removed, "originalsKept": r.kept,
            "slicesLeft": r.left}


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 10_000_000 else f"{n / 1e3:,.1f} kB"
