"""``coord status``: which datasets are out of date and why, in words; ``short_status`` is the
column of ``coord list``.

``build/status.py`` decides; this module only words its results. It does not import Arrow, so
the command answers at once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .context import complete_dataset, workspace
from .output import Output, count

if TYPE_CHECKING:
    from ..build.status import DatasetStatus, Reason

# by the name of the status service's Reason (the service is imported by the commands that use it)
_SHORT = {
    "NEW_INPUT": "behind",
    "QUERY_CHANGED": "query changed",
    "SOURCE_CHANGED": "source changed",
    "NEVER_PULLED": "never pulled",
    "WAITING": "waiting",
    "ROWS_WAITING": "rows waiting",
    "NOT_CHECKED": "not checked",
}


def short_status(st: DatasetStatus) -> str:
    """A word or two for the column of ``coord list``."""
    return ", ".join(_SHORT[r.name] for r in st.reasons) or "up to date"


def status_words(st: DatasetStatus) -> str:
    """What is out of date and why, in one line (and the rows its steps dropped as late)."""
    words = "; ".join(_reason_words(st, r) for r in st.reasons) or "up to date"
    late = f"; {st.late_rows:,} rows dropped as late so far (coord log --builds)" if st.late_rows else ""
    if st.late_rows_policy is not None and not st.late_rows_policy_kept:
        late += ("; it drops rows that arrive late (added before corrections: coord add --replace "
                 "its manifest to have them correct its results)")
    return words + late


def _reason_words(st: DatasetStatus, reason: Reason) -> str:
    from ..build.status import Reason

    if reason is Reason.NEW_INPUT:
        n = sum(st.new_input.values())
        per_input = ", ".join(f"{i}: {k}" for i, k in st.new_input.items())
        return f"{count(n, 'new input block')} behind ({per_input})"
    if reason in (Reason.SOURCE_CHANGED, Reason.NEVER_PULLED):
        names = ", ".join(st.new_files[:3]) + (", ..." if len(st.new_files) > 3 else "")
        partly = f"; {count(st.partly_in, 'record')} of the first already in" if st.partly_in else ""
        return f"{reason.value}: {count(len(st.new_files), 'file')} to ingest ({names}{partly})"
    if reason is Reason.WAITING:
        return f"waiting for data from {', '.join(st.waiting_for)}"
    if reason is Reason.NOT_CHECKED:
        return f"not checked ({st.unchecked})"
    if reason is Reason.ROWS_WAITING:
        from ..build.pending_rows import pending_words  # the workspace layer: not for --help

        return "; ".join(pending_words(p) for p in st.pending)
    return reason.value


def reason_codes(st: DatasetStatus) -> list[str]:
    """The reasons as the JSON outputs name them: ``newInput``, ``queryChanged``, ..."""
    return [_camel(r.name) for r in st.reasons]


def status_json(st: DatasetStatus) -> dict:
    from ..build.pending_rows import pending_json

    return {"id": st.dataset_id, "odf": st.odf, "kind": st.kind, "upToDate": st.up_to_date,
            "reasons": reason_codes(st),
            "newInputBlocks": st.new_input, "newFiles": st.new_files, "recordsOfFirstFileIn": st.partly_in,
            "waitingFor": st.waiting_for, "notChecked": st.unchecked or None, "lateRows": st.late_rows,
            "pendingRows": pending_json(st.pending), "lateRowsPolicy": st.late_rows_policy,
            "words": status_words(st)}


def _camel(name: str) -> str:
    first, *rest = name.lower().split("_")
    return first + "".join(w.capitalize() for w in rest)


@click.command("status")
@click.argument("datasets", nargs=-1, shell_complete=complete_dataset)
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def status_(ctx: click.Context, datasets: tuple[str, ...], output: str) -> None:
    """Show which datasets are out of date and why (without pulling anything)."""
    from ..build import status as status_service

    statuses = status_service.status(workspace(ctx), list(datasets))
    if output == "json":
        Output().json([status_json(st) for st in statuses])
    else:
        Output().columns(("dataset", "kind", "status"),  # the version: coord list, or -o json
                         ((st.dataset_id, st.kind, status_words(st)) for st in statuses))
