"""``coord diff``: the rows added, removed and changed between two versions of a dataset."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from .context import complete_dataset, workspace
from .output import Output

if TYPE_CHECKING:
    from ..query.diff import Diff


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--from", "old", metavar="BLOCK|TIME",
              help="The version to compare from: a block (hash or prefix, as coord log shows it) "
                   "or the newest block at that system time (RFC 3339). Default: the block before "
                   "the last one that added records.")
@click.option("--to", "new", metavar="BLOCK|TIME", help="The version to compare to (default: the head).")
@click.option("--from-as-of", "old_as_of", metavar="TIME",
              help="Read the --from version's state as it stood at that event time (RFC 3339).")
@click.option("--to-as-of", "new_as_of", metavar="TIME",
              help="Read the --to version's state as it stood at that event time (RFC 3339).")
@click.option("--output", "-o", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="json: counts, versions and rows; csv: a row per change, "
                                      "old.COLUMN and new.COLUMN for each column.")
@click.option("--max-rows", default=1000, show_default=True, help="Rows a table shows at most.")
@click.pass_context
def diff(ctx: click.Context, dataset: str, old: str | None, new: str | None, old_as_of: str | None,
         new_as_of: str | None, output: str, max_rows: int) -> None:
    """Show what changed in DATASET between two versions: rows added, removed and changed.

    \b
    A root with a primary key (snapshot, ledger, stream merges) is compared key by key, a
    changed row with its old and new values; any other dataset row by row:
      coord diff ref.airports                      # what its last change did
      coord diff ref.airports --from 3116548c2a1f  # since the block I used
      coord diff ref.airports --from-as-of 2020-02-15T00:00:00Z --to-as-of 2020-03-15T00:00:00Z
    """
    from ..query.diff import Named, counts_line, diff, document, event_time, flat

    ds = workspace(ctx).dataset(dataset)
    found = diff(ds, old, new, event_time(old_as_of, Named.old_as_of), event_time(new_as_of, Named.new_as_of),
                 limit=max_rows + 1 if output == "table" else None)  # one more: "more" is told
    show = Output(output)
    if output == "json":
        show.json(json.loads(document(found)))
    elif output == "csv":
        show.note(f"{counts_line(found)}: {_versions(found)}")
        show.records(flat(found))
    else:
        show.line(f"{counts_line(found)} ({_versions(found)})")
        _table(show, found, max_rows)


def _versions(d: Diff) -> str:
    return f"{d.dataset} from {d.old.describe()} to {d.new.describe()}"


def _table(show: Output, d: Diff, max_rows: int) -> None:
    """A row per change, each column's value; a changed column shows ``old → new``."""
    from ..query.values import cell_text, python_rows

    if not d.rows.num_rows:
        return
    rows = python_rows(d.rows.slice(0, max_rows))
    columns = next(list(r["new"] or r["old"]) for r in rows)

    def cell(row: dict[str, Any], column: str) -> str:
        values = [row[side][column] if row[side] is not None else None for side in ("old", "new")]
        text = ["NULL" if v is None else cell_text(v) for v in values]
        if row["change"] == "changed" and column in row["changed"]:
            return f"{text[0]} → {text[1]}"
        return text[1] if row["new"] is not None else text[0]

    show.table(["change", *columns], ([r["change"], *(cell(r, c) for c in columns)] for r in rows))
    total = sum(d.counts.values())
    if total > max_rows:
        show.line(f"({max_rows:,} of {total:,} shown: --max-rows, or -o csv for all)")
