"""``coord log``: a dataset's metadata chain, and with ``--builds`` the catalog of its builds.

``transform/builds.py`` decides which input blocks and query made each block; this module only
words it. Neither view imports Arrow, so the command answers at once.

A current-ODF (0.39) dataset's blocks are shown newest first with their sequence number,
multihash, system time, signer and, in one line, what the event says (``_event_words``), then
the block as its manifest; ``--builds`` words its ``ExecuteTransform`` steps (``store.steps``).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..metadata.timestamps import format_timestamp
from .context import complete_dataset, workspace
from .output import Output, count, short
from .trust import signed_words

if TYPE_CHECKING:
    from ..transform.builds import Build


@click.command()
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml")
@click.option("--builds", is_flag=True,
              help="Per block a derivative computed: the input blocks and the query that made it.")
@click.pass_context
def log(ctx: click.Context, dataset: str, output: str, builds: bool) -> None:
    """Show the metadata chain of DATASET, newest block first."""
    show = Output(output)
    from ..workspace.config import OdfVersion  # here: it brings YAML, which --help does not need

    ws = workspace(ctx)
    if ws.odf_of(ws.dataset(dataset).id) is OdfVersion.V039:  # ws.dataset checks the name
        _current_log(ws, dataset, show, builds)
        return
    from ..metadata.yaml_codec import render, to_dict

    if builds:
        from ..transform.builds import builds as build_catalog

        _show_builds(show, build_catalog(ws, ws.dataset(dataset)))
        return
    from ..trust.authorship import block_signers

    chain = list(ws.dataset(dataset).chain())
    signers = block_signers(ws, dataset, chain)
    if show.format == "json":
        docs = [dict(to_dict(c.block), signer=s.key.hex() if s.key else None, authorship=s.status.value)
                for c, s in zip(chain, signers, strict=True)]
        show.line(json.dumps(docs, indent=2))  # through the console, as the YAML
        return
    for c, s in zip(chain, signers, strict=True):
        show.line(f"# {signed_words(s)}\n" + render(c.block), end="")
        show.line("---")


def _show_builds(show: Output, builds: list[Build]) -> None:
    """Per executed block, the input blocks and query behind it."""
    if show.format == "json":
        show.json([_build_json(b) for b in builds])
        return
    for b in builds:
        late = f", {b.late_rows:,} dropped as late" if b.late_rows else ""
        show.line(f"{short(b.block_hash)} {format_timestamp(b.system_time)} "
                  f"+{b.num_records:,} records{late}, query of block {short(b.query_block)}")
        for u in b.inputs:
            blocks = " ".join(short(h) for h in u.blocks) or "-"
            show.line(f"  {u.dataset_id} {u.interval}: {count(len(u.blocks), 'block')} "
                      f"({u.num_records:,} records) {blocks}")


def _build_json(b: Build) -> dict:
    from ..metadata.yaml_codec import to_dict

    return {
        "block": b.block_hash.hex(),
        "systemTime": format_timestamp(b.system_time),
        "numRecords": b.num_records,
        "lateRows": b.late_rows,
        "queryBlock": b.query_block.hex(),
        "transform": to_dict(b.transform),
        "inputs": [{"dataset": u.dataset_id, "interval": str(u.interval), "numRecords": u.num_records,
                    "blocks": [h.hex() for h in u.blocks]} for u in b.inputs],
    }


# --- current ODF (0.39) ------------------------------------------------------------------------


def _current_log(ws, dataset: str, show: Output, builds: bool) -> None:
    from ..store.overview import CurrentDatasets

    current = CurrentDatasets(ws)
    if builds:
        from ..store.steps import steps

        found = steps(current, dataset)
        if show.format == "json":
            show.json([_step_json(s) for s in found])
        for step in found if show.format != "json" else ():
            show.line(f"{step.sequence_number} {step.block_hash} {format_timestamp(step.system_time)} "
                      f"+{step.num_records:,} records{_range(step.offsets)}")
            for i in step.inputs:
                show.line(f"  {i.dataset}{_range(i.offsets) or ' nothing new'}")
        return
    from ..metadata.odf39.manifests import dump_manifest
    from ..metadata.yaml_codec import to_dict
    from ..store.dataset import CurrentDataset
    from ..store.signatures import signed_blocks, signers_newest_first

    newest_first = list(reversed(current.state(dataset).blocks))
    # signatures found valid by an earlier command are not checked again (as a 0.18 chain's)
    signed = signed_blocks(ws, CurrentDataset(ws, dataset).root, newest_first,
                           ws.checked_blocks(dataset).signatures)
    signers = signers_newest_first(ws, dataset, signed)
    if show.format == "json":
        show.json([{"sequenceNumber": b.block.sequence_number, "hash": str(b.hash),
                    "systemTime": format_timestamp(b.block.system_time),
                    "event": type(b.block.event).__name__, "says": _event_words(b.block.event),
                    "block": to_dict(b.block), "signer": s.key.hex() if s.key else None,
                    "authorship": "invalid signature" if sb.invalid else s.status.value}
                   for b, sb, s in zip(newest_first, signed, signers, strict=True)])
        return
    shown: list[str] = []  # written a hundred blocks at a time: a write per line cost a tenth
    for b, sb, s in zip(newest_first, signed, signers, strict=True):
        signer = "INVALID signature" if sb.invalid else signed_words(s)
        shown.append(f"# block {b.block.sequence_number} {b.hash} {format_timestamp(b.block.system_time)}: "
                     f"{signer}\n# {type(b.block.event).__name__}: {_event_words(b.block.event)}\n"
                     + dump_manifest(b.block) + "---\n")
        if len(shown) == 100:
            show.line("".join(shown), end="")
            shown.clear()
    if shown:
        show.line("".join(shown), end="")


def _range(offsets: tuple[int, int] | None) -> str:
    return f" offsets {offsets[0]}..{offsets[1]}" if offsets is not None else ""


def _step_json(s) -> dict:
    return {"sequenceNumber": s.sequence_number, "block": str(s.block_hash),
            "systemTime": format_timestamp(s.system_time), "numRecords": s.num_records,
            "offsets": list(s.offsets) if s.offsets else None,
            "watermark": format_timestamp(s.watermark) if s.watermark else None,
            "inputs": [{"dataset": i.dataset, "offsets": list(i.offsets) if i.offsets else None,
                        "prevBlock": str(i.prev_block) if i.prev_block else None,
                        "newBlock": str(i.new_block) if i.new_block else None} for i in s.inputs]}


def _event_words(event) -> str:
    """What a 0.39 event says, in one line."""
    from ..metadata.odf39 import events as e

    if isinstance(event, e.Seed):
        return f"{event.dataset_kind.name.lower()} dataset {event.dataset_id}"
    if isinstance(event, e.AddData | e.ExecuteTransform):
        data = event.new_data
        words = [f"offsets {data.offset_interval.start}..{data.offset_interval.end} "
                 f"({count(data.offset_interval.end - data.offset_interval.start + 1, 'record')})"
                 if data is not None else "no new records"]
        if event.new_watermark is not None:
            words.append(f"watermark {format_timestamp(event.new_watermark)}")
        if isinstance(event, e.ExecuteTransform):
            words += [f"input {q.dataset_id} offsets {_range_words(q.prev_offset, q.new_offset)}"
                      for q in event.query_inputs]
        elif event.new_source_state is not None:
            words.append(f"source state {event.new_source_state.kind} {event.new_source_state.value}")
        if event.new_checkpoint is not None:
            words.append(f"checkpoint {event.new_checkpoint.physical_hash}")
        return ", ".join(words)
    if isinstance(event, e.SetDataSchema):
        if event.schema is None:
            return "an Arrow schema (raw)"
        return "columns " + ", ".join(f"{f.name} {_type_words(f.type)}" for f in event.schema.fields)
    if isinstance(event, e.SetPollingSource | e.AddPushSource):
        if isinstance(event, e.SetPollingSource):
            fetch = event.fetch
            where = getattr(fetch, "url", None) or getattr(fetch, "path", None) or type(fetch).__name__
            head = f"fetch {where}, "
        else:
            head = f"push source {event.source_name}, "
        return f"{head}read {type(event.read).__name__}, merge {type(event.merge).__name__}"
    if isinstance(event, e.SetTransform):
        inputs = ", ".join(f"{i.dataset_ref}" + (f" as {i.alias}" if i.alias else "") for i in event.inputs)
        return f"{event.transform.engine} over {inputs}: {_query_words(event.transform)}"
    if isinstance(event, e.SetVocab):
        return ", ".join(f"{k} {v}" for k, v in vars(event).items() if isinstance(v, str))
    return type(event).__name__


def _range_words(prev: int | None, new: int | None) -> str:
    if new is None or (prev is not None and new <= prev):
        return "none new"
    return f"{0 if prev is None else prev + 1}..{new}"


def _type_words(t) -> str:
    from ..metadata.odf39.data import DataTypeOption

    if isinstance(t, DataTypeOption):
        return _type_words(t.inner) + "?"
    return t.KIND


def _query_words(transform) -> str:
    if transform.query is not None:
        return transform.query
    if transform.queries and len(transform.queries) == 1 and transform.queries[0].alias is None:
        return transform.queries[0].query  # the stored form of a single query
    return "; ".join(f"{q.alias or 'result'} = {q.query}" for q in transform.queries or ())
