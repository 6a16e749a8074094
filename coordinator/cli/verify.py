"""``coord verify``: a dataset's chain, data files, checkpoints and signers checked, its
transforms replayed; the report in words, a failure as the command's error."""
from __future__ import annotations

from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING

import click

from ..errors import CoordError
from ..metadata.timestamps import format_timestamp
from .context import complete_dataset, workspace
from .output import Output, count
from .trust import signer_line

if TYPE_CHECKING:
    from ..engine.session import EngineOnDemand
    from ..trust.verify import VerifyReport


class VerifyFailed(CoordError):
    pass


@click.command("verify")
@click.argument("dataset", shell_complete=complete_dataset)
@click.option("-r", "--recursive", is_flag=True, help="Verify the upstream datasets too.")
@click.option("--integrity", is_flag=True, help="Check hashes and signatures only (no replay).")
@click.option("--deep", is_flag=True,
              help="Recompute every logical hash too (slower; a matching physical hash already "
                   "proves the file is unchanged).")
@click.option("--engine", "engine_spec", metavar="RUNTIME[:IMAGE]",
              help="Replay with this engine (sandbox, container or container:IMAGE) instead of "
                   "the configured one; when everything reproduces, record its compatibility.")
@click.option("--invariance", is_flag=True,
              help="Instead: recompute the derivative from all of its inputs in one step (nothing is "
                   "written) and compare its records with the ones committed step by step.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: a list with one report per dataset (with --invariance: one object).")
@click.pass_context
def verify_(ctx: click.Context, dataset: str, recursive: bool, integrity: bool, deep: bool,
            engine_spec: str | None, invariance: bool, output: str) -> None:
    """Check DATASET's chain, data files and checkpoints, who signed it, and replay its transforms."""
    from ..store.verified import CurrentVerifier
    from ..trust import verify

    if engine_spec and integrity:
        raise click.UsageError("--engine replays transforms; it cannot go with --integrity")
    if invariance and (recursive or integrity or deep):
        raise click.UsageError("--invariance checks one dataset; it cannot go with -r, --integrity or --deep")
    ws = workspace(ctx)
    if invariance:
        _check_invariance(ws, dataset, engine_spec, Output(output))
        return
    show = Output(output)
    with ExitStack() as stack:
        if integrity:  # no engine, nor what replays with one: the command imports neither
            engine = None
            reports = verify.verify(ws, dataset, recursive=recursive, integrity_only=True, deep=deep,
                                    progress=show.progress(), current=CurrentVerifier(ws, None))
        else:
            engine, reports = _verify_with_replay(ws, stack, dataset, recursive, deep, engine_spec, show)
    replayed_with, recorded = _engine_notes(ws, reports, engine, engine_spec) if engine else ({}, {})
    if show.format == "json":
        show.json([_report_json(r, recorded.get(r.dataset_id)) for r in reports])
    for report in reports if show.format != "json" else ():
        bad = {p.block_hash for p in report.problems}
        differs = {p.block_hash for p in report.replay_problems}
        odf = " (ODF 0.39)" if report.odf == "0.39" else ""
        show.line(f"{report.dataset_id}: {len(report.blocks)} blocks{odf}")
        for cb, author in zip(report.blocks, report.authors, strict=True):
            mark = "BAD" if cb.hash in bad else "DIFF" if cb.hash in differs else "ok"
            signer = f" {author.signer.hex()[:12]}" if author.signer else ""
            show.line(f"  {mark:4} {_short_block(report, cb)} {format_timestamp(cb.block.system_time)} "
                      f"{author.status.value}{signer}")
        show.line(f"  integrity: {'FAILED' if report.problems else 'ok'}")
        for p in report.problems:
            show.line(f"    problem: {p}")
        if report.compaction:
            show.line(f"  compaction: {report.compaction}")
        _show_authorship(show, report)
        if report.odf == "0.39":  # only current-ODF chains are exchanged with the reference
            show.line(f"  reference rules: {'FAILED' if report.reference_problems else 'ok'}")
            for p in report.reference_problems:
                show.line(f"    problem: {p}")
        show.line(f"  reproducibility: {report.reproducibility}")
        for p in report.replay_problems:
            show.line(f"    problem: {p}")
        if report.dataset_id in replayed_with:
            show.line(f"  replayed with {replayed_with[report.dataset_id]}")
            if report.dataset_id in recorded:
                show.line(f"  recorded compatibility with this engine in block "
                          f"{recorded[report.dataset_id].hex()[:12]}")
    failed = [r for r in reports if not r.ok]
    if failed:
        first = failed[0]
        raise VerifyFailed(f"{first.dataset_id}: first bad {first.first_problem}")


def _verify_with_replay(ws, stack: ExitStack, dataset: str, recursive: bool, deep: bool,
                        engine_spec: str | None, show: Output) -> tuple[EngineOnDemand, list[VerifyReport]]:
    """The reports of ``verify`` with transforms replayed by an engine started on first need."""
    from ..build import current_derivative
    from ..engine.session import EngineOnDemand, engine_reads
    from ..store.overview import CurrentDatasets
    from ..store.verified import CurrentVerifier
    from ..transform import replay as replaying
    from ..trust import verify
    from ..workspace.graph import DatasetGraph

    def readable() -> list[str]:
        graph = DatasetGraph(ws, current=CurrentDatasets(ws).inputs)
        return engine_reads(ws, graph.order([dataset], recursive=True) if recursive else [dataset],
                            graph=graph)

    settings = _engine_settings(ws, engine_spec) if engine_spec else None
    engine = EngineOnDemand(ws, stack, readable, settings)
    reports = verify.verify(ws, dataset, recursive=recursive, integrity_only=False, deep=deep,
                            replay=replaying.make_replay(engine.get), progress=show.progress(),
                            current=CurrentVerifier(ws, partial(current_derivative.replay_current, ws,
                                                                engine=engine.get)))
    return engine, reports


def _engine_notes(ws, reports: list[VerifyReport], engine: EngineOnDemand,
                  engine_spec: str | None) -> tuple[dict[str, str], dict[str, bytes]]:
    """How the engine that replayed each dataset relates to its chain, and (``--engine``) the
    block that now records the engine's compatibility, by dataset."""
    from ..transform import replay as replaying

    replayed_with, recorded = {}, {}
    for report in reports:
        if engine.identity is None or report.reproducibility != "reproduced":
            continue
        if report.odf == "0.39":  # its blocks have no place for an engine (schemas/ODF-039.md)
            if engine_spec:
                replayed_with[report.dataset_id] = (
                    f"the {engine.identity.runtime} engine {engine.identity.version} (a 0.39 chain "
                    "names no engine build: no compatibility is recorded)")
            continue
        ds = ws.dataset(report.dataset_id)
        replayed_with[report.dataset_id] = replaying.engine_note(ds, engine.identity)  # before recording
        if engine_spec:
            recorded[report.dataset_id] = replaying.record_compatibility(ds, engine.identity)
    return replayed_with, recorded


def _report_json(report: VerifyReport, compatibility: bytes | None) -> dict:
    bad = {p.block_hash for p in report.problems}
    differs = {p.block_hash for p in report.replay_problems}
    return {
        "id": report.dataset_id, "odf": report.odf, "ok": report.ok,
        "blocks": [{"hash": _block_hash(report, cb), "systemTime": format_timestamp(cb.block.system_time),
                    "check": "bad" if cb.hash in bad else "differs" if cb.hash in differs else "ok",
                    "authorship": author.status.value,
                    "signer": author.signer.hex() if author.signer else None}
                   for cb, author in zip(report.blocks, report.authors, strict=True)],
        "integrity": {"ok": not report.problems, "problems": [str(p) for p in report.problems]},
        "compaction": report.compaction,
        "authorship": {"ok": not report.authorship_problems, "policy": report.policy.value,
                       "signers": [{"key": s.key.hex() if s.key else None, "status": s.status.value,
                                    "blocks": s.blocks, "name": s.name or None} for s in report.signers],
                       "problems": [str(p) for p in report.authorship_problems]},
        "reproducibility": {"verdict": report.reproducibility,
                            "problems": [str(p) for p in report.replay_problems]},
        "referenceRules": {"ok": not report.reference_problems,
                           "problems": [str(p) for p in report.reference_problems]},
        "compatibilityRecorded": compatibility.hex() if compatibility is not None else None,
    }


def _short_block(report: VerifyReport, cb) -> str:
    """12 hex digits of the block hash (of a 0.39 block's digest, after its sequence number)."""
    if report.odf == "0.39":
        return f"{cb.block.sequence_number} {cb.stored.hash.digest.hex()[:12]}"
    return cb.hash.hex()[:12]


def _block_hash(report: VerifyReport, cb) -> str:
    return str(cb.stored.hash) if report.odf == "0.39" else cb.hash.hex()


def _check_invariance(ws, dataset: str, engine_spec: str | None, show: Output) -> None:
    from ..build.current_invariance import check_current_invariance
    from ..engine.session import EngineOnDemand, engine_reads
    from ..store.overview import CurrentDatasets
    from ..transform.invariance import Verdict, check_invariance
    from ..workspace.config import OdfVersion
    from ..workspace.graph import DatasetGraph

    settings = _engine_settings(ws, engine_spec) if engine_spec else None
    current = ws.odf_of(dataset) is OdfVersion.V039
    with ExitStack() as stack:
        engine = EngineOnDemand(ws, stack, lambda: engine_reads(
            ws, [dataset], graph=DatasetGraph(ws, current=CurrentDatasets(ws).inputs)), settings)
        check = check_current_invariance if current else check_invariance
        report = check(ws, dataset, engine.get)
    if show.format == "json":
        show.json(_invariance_json(report))
    elif report.verdict is Verdict.NOTHING_TO_CHECK:
        show.line(f"{dataset}: nothing to check: no step has run yet")
    else:
        show.line(f"{dataset}: {_invariance_words(report)}")
        for side, rows in (("only committed", report.only_committed),
                           ("only in one step", report.only_one_step)):
            for row in rows.first:
                show.line(f"  {side}: {_row_words(row)}")
            if rows.count > len(rows.first):
                show.line(f"  {side}: ... {rows.count - len(rows.first):,} more")
        if report.committed_watermark != report.one_step_watermark:
            show.line(f"  output watermark: {_time(report.committed_watermark)} step by step, "
                      f"{_time(report.one_step_watermark)} in one step")
    if not report.invariant:
        raise VerifyFailed(f"{dataset}: {_invariance_words(report)}")


def _invariance_words(report) -> str:
    """``invariant: 12,345 records, the same computed in one step (3 steps)`` or why not."""
    steps = count(report.steps, "step")
    if report.invariant:
        return (f"invariant: {report.committed:,} records, the same computed in one step "
                f"({steps} committed; output watermark {_time(report.committed_watermark)})")
    if report.columns_differ:
        return f"not invariant: the one step gives other columns ({', '.join(report.columns_differ)})"
    if report.differing_records == 0:
        return (f"not invariant: the same {report.committed:,} records, but the output watermark is "
                f"{_time(report.one_step_watermark)} in one step, {_time(report.committed_watermark)} "
                f"after {steps}")
    return (f"not invariant: {count(report.differing_records, 'record')} differ "
            f"({report.only_committed.count:,} only in the {report.committed:,} committed in {steps}, "
            f"{report.only_one_step.count:,} only in the {report.one_step:,} computed in one step)")


def _invariance_json(report) -> dict:
    def rows(d) -> dict:
        return {"count": d.count, "first": [{k: _json_value(v) for k, v in r.items()} for r in d.first]}

    return {"id": report.dataset_id, "verdict": report.verdict.value, "steps": report.steps,
            "records": {"committed": report.committed, "oneStep": report.one_step},
            "onlyCommitted": rows(report.only_committed), "onlyOneStep": rows(report.only_one_step),
            "columnsDiffer": list(report.columns_differ),
            "outputWatermark": {"committed": _time(report.committed_watermark, None),
                                "oneStep": _time(report.one_step_watermark, None)}}


def _row_words(row: dict) -> str:
    return " ".join(f"{k}={'NULL' if v is None else _json_value(v)}" for k, v in row.items())


def _json_value(value):
    from ..query.tail import json_value

    return value if isinstance(value, int | float | str | bool) or value is None else json_value(value)


def _time(moment, none: str | None = "none"):
    return format_timestamp(moment) if moment is not None else none


def _show_authorship(show: Output, report: VerifyReport) -> None:
    """One line for the verdict under ``trust.require``, then one per signer unless all trusted."""
    from ..trust.authorship import Authorship

    trusted = all(s.status is Authorship.TRUSTED for s in report.signers)
    verdict = "FAILED" if report.authorship_problems else "ok" if trusted else "ok, with warnings"
    show.line(f"  authorship: {verdict} (trust.require: {report.policy.value})")
    for s in report.signers:
        show.line(f"    {signer_line(s)}")
    for p in report.authorship_problems:
        show.line(f"    problem: {p}")


def _engine_settings(ws, spec: str):
    """``sandbox``, ``container`` or ``container:IMAGE`` over the workspace's engine settings."""
    import dataclasses

    from ..engine.session import engine_settings

    runtime, _, image = spec.partition(":")
    if runtime not in ("sandbox", "container") or (image and runtime != "container"):
        raise click.UsageError(f"--engine {spec}: expected sandbox, container or container:IMAGE")
    settings = dataclasses.replace(engine_settings(ws), runtime=runtime)
    return dataclasses.replace(settings, image=image) if image else settings
