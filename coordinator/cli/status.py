"""``coord status`` and the build catalog of ``coord log --builds``, in words.

``build/status.py`` and ``transform/builds.py`` decide; this module only words their results.
Neither imports Arrow, so these commands answer at once.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..metadata.timestamps import format_timestamp
from .console import TextTable, out, short
from .console import workspace as _ws

if TYPE_CHECKING:
    from ..build.status import DatasetStatus, Reason
    from ..transform.builds import Build

# by the name of the status service's Reason (the service is imported by the commands that use it)
_SHORT = {
    "NEW_INPUT": "behind",
    "QUERY_CHANGED": "query changed",
    "SOURCE_CHANGED": "source changed",
    "NEVER_PULLED": "never pulled",
    "WAITING": "waiting",
    "NOT_CHECKED": "not checked",
}


def short_status(st: DatasetStatus) -> str:
    """A word or two for the column of ``coord list``."""
    return ", ".join(_SHORT[r.name] for r in st.reasons) or "up to date"


def status_words(st: DatasetStatus) -> str:
    """What is out of date and why, in one line."""
    return "; ".join(_reason_words(st, r) for r in st.reasons) or "up to date"


def _reason_words(st: DatasetStatus, reason: Reason) -> str:
    from ..build.status import Reason

    if reason is Reason.NEW_INPUT:
        n = sum(st.new_input.values())
        per_input = ", ".join(f"{i}: {k}" for i, k in st.new_input.items())
        return f"{_count(n, 'new input block')} behind ({per_input})"
    if reason in (Reason.SOURCE_CHANGED, Reason.NEVER_PULLED):
        names = ", ".join(st.new_files[:3]) + (", ..." if len(st.new_files) > 3 else "")
        partly = f"; {_count(st.partly_in, 'record')} of the first already in" if st.partly_in else ""
        return f"{reason.value}: {_count(len(st.new_files), 'file')} to ingest ({names}{partly})"
    if reason is Reason.WAITING:
        return f"waiting for data from {', '.join(st.waiting_for)}"
    if reason is Reason.NOT_CHECKED:
        return f"not checked ({st.unchecked})"
    return reason.value


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


@click.command("status")
@click.argument("datasets", nargs=-1)
@click.pass_context
def status_(ctx: click.Context, datasets: tuple[str, ...]) -> None:
    """Show which datasets are out of date and why (without pulling anything)."""
    from ..build import status as status_service

    table = TextTable("dataset", "kind", "status")
    for st in status_service.status(_ws(ctx), list(datasets)):
        table.add_row(st.dataset_id, st.kind, status_words(st))
    table.print()


def print_builds(builds: list[Build], output: str) -> None:
    """``coord log DS --builds``: per executed block, the input blocks and query behind it."""
    if output == "json":
        click.echo(json.dumps([_build_json(b) for b in builds], indent=2))
        return
    for b in builds:
        out.print(f"{short(b.block_hash)} {format_timestamp(b.system_time)} "
                  f"+{b.num_records:,} records, query of block {short(b.query_block)}", markup=False)
        for u in b.inputs:
            blocks = " ".join(short(h) for h in u.blocks) or "-"
            out.print(f"  {u.dataset_id} {u.interval}: {_count(len(u.blocks), 'block')} "
                      f"({u.num_records:,} records) {blocks}", markup=False)


def _build_json(b: Build) -> dict:
    from ..metadata.yaml_codec import to_dict

    return {
        "block": b.block_hash.hex(),
        "systemTime": format_timestamp(b.system_time),
        "numRecords": b.num_records,
        "queryBlock": b.query_block.hex(),
        "transform": to_dict(b.transform),
        "inputs": [{"dataset": u.dataset_id, "interval": str(u.interval), "numRecords": u.num_records,
                    "blocks": [h.hex() for h in u.blocks]} for u in b.inputs],
    }
