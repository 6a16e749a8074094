"""``coord verify``: a dataset's chain, data files, checkpoints and signers checked, its
transforms replayed; the report in words, a failure as the command's error."""
from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

import click

from ..errors import CoordError
from ..metadata.timestamps import format_timestamp
from .context import complete_dataset, workspace
from .output import Output
from .trust import signer_line

if TYPE_CHECKING:
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
@click.pass_context
def verify_(ctx: click.Context, dataset: str, recursive: bool, integrity: bool, deep: bool,
            engine_spec: str | None) -> None:
    """Check DATASET's chain, data files and checkpoints, who signed it, and replay its transforms."""
    from ..engine.session import EngineOnDemand, engine_reads
    from ..transform import replay as replaying
    from ..trust import verify
    from ..workspace.graph import DatasetGraph

    if engine_spec and integrity:
        raise click.UsageError("--engine replays transforms; it cannot go with --integrity")
    ws = workspace(ctx)
    show = Output()
    with ExitStack() as stack:
        def readable() -> list[str]:
            graph = DatasetGraph(ws)
            return engine_reads(ws, graph.order([dataset], recursive=True) if recursive else [dataset],
                                graph=graph)

        settings = _engine_settings(ws, engine_spec) if engine_spec else None
        engine = EngineOnDemand(ws, stack, readable, settings)
        replay = None if integrity else replaying.make_replay(engine.get)  # engine on first need
        reports = verify.verify(ws, dataset, recursive=recursive, integrity_only=integrity,
                                deep=deep, replay=replay, progress=show.progress())
    for report in reports:
        bad = {p.block_hash for p in report.problems}
        differs = {p.block_hash for p in report.replay_problems}
        show.line(f"{report.dataset_id}: {len(report.blocks)} blocks")
        for cb, author in zip(report.blocks, report.authors, strict=True):
            mark = "BAD" if cb.hash in bad else "DIFF" if cb.hash in differs else "ok"
            signer = f" {author.signer.hex()[:12]}" if author.signer else ""
            show.line(f"  {mark:4} {cb.hash.hex()[:12]} {format_timestamp(cb.block.system_time)} "
                      f"{author.status.value}{signer}")
        show.line(f"  integrity: {'FAILED' if report.problems else 'ok'}")
        for p in report.problems:
            show.line(f"    problem: {p}")
        _show_authorship(show, report)
        show.line(f"  reproducibility: {report.reproducibility}")
        for p in report.replay_problems:
            show.line(f"    problem: {p}")
        if engine.identity is not None and report.reproducibility == "reproduced":
            ds = ws.dataset(report.dataset_id)
            show.line(f"  replayed with {replaying.engine_note(ds, engine.identity)}")
            if engine_spec:
                h = replaying.record_compatibility(ds, engine.identity)
                show.line(f"  recorded compatibility with this engine in block {h.hex()[:12]}")
    failed = [r for r in reports if not r.ok]
    if failed:
        first = failed[0]
        raise VerifyFailed(f"{first.dataset_id}: first bad {first.first_problem}")


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
