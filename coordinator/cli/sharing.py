"""CLI for sharing and checking datasets: ``coord repo``, ``coord push`` and ``coord verify``.

``register(cli)`` adds the commands to the main group; ``coord pull REPO/DS`` lives with the
other pull command and calls ``repository.pull_from_repository``. The services (which need
Arrow) are imported by the commands, so loading the command group stays fast.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

import click

from ..errors import CoordError
from ..metadata.timestamps import format_timestamp
from .console import LazyConsole, err, out, workspace
from .trust import signer_line

if TYPE_CHECKING:
    from rich.progress import Progress as RichBar

    from ..trust.verify import VerifyReport


class VerifyFailed(CoordError):
    pass


class RichProgress:
    """The services' Progress protocol as a rich bar of bytes on stderr (silent when piped)."""

    def __init__(self, console: LazyConsole):
        self.console = console
        self._bar: RichBar | None = None

    def start(self, total_bytes: int | None, description: str) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as RichBar

        self._bar = RichBar(
            TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            TimeRemainingColumn(), console=self.console.real(), transient=True,
            disable=not self.console.is_terminal,
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=total_bytes)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@click.group("repo")
def repo() -> None:
    """Repositories to push datasets to and pull them from."""


@repo.command("add")
@click.argument("name")
@click.argument("url")
@click.pass_context
def repo_add(ctx: click.Context, name: str, url: str) -> None:
    """Add repository NAME at URL (file:///path, s3://bucket/prefix, s3+http://host:port/bucket/prefix)."""
    from .. import repository

    r = repository.add_repository(workspace(ctx), name, url)
    out.print(f"added repository {r.name} ({r.url})", markup=False)


@repo.command("list")
@click.pass_context
def repo_list(ctx: click.Context) -> None:
    """List repositories."""
    from .. import repository

    for r in repository.list_repositories(workspace(ctx)):
        out.print(f"{r.name}\t{r.url}", markup=False)


@repo.command("delete")
@click.argument("name")
@click.pass_context
def repo_delete(ctx: click.Context, name: str) -> None:
    """Forget repository NAME (nothing in it is deleted)."""
    from .. import repository

    repository.delete_repository(workspace(ctx), name)
    out.print(f"deleted repository {name}")


@click.command()
@click.argument("dataset")
@click.option("--to", "to", metavar="REPO[/NAME]", help="Where to push (default: where it went last).")
@click.pass_context
def push(ctx: click.Context, dataset: str, to: str | None) -> None:
    """Upload DATASET's new blocks and files to a repository."""
    from .. import repository

    result = repository.push_dataset(workspace(ctx), dataset, to, progress=RichProgress(err))
    mb = f" ({result.files} files, {result.bytes / 1e6:,.1f} MB)" if result.files else ""
    out.print(result.message + mb, markup=False)


@click.command("verify")
@click.argument("dataset")
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
    with ExitStack() as stack:
        def readable() -> list[str]:
            graph = DatasetGraph(ws)
            return engine_reads(ws, graph.order([dataset], recursive=True) if recursive else [dataset],
                                graph=graph)

        settings = _engine_settings(ws, engine_spec) if engine_spec else None
        engine = EngineOnDemand(ws, stack, readable, settings)
        replay = None if integrity else replaying.make_replay(engine.get)  # engine on first need
        reports = verify.verify(ws, dataset, recursive=recursive, integrity_only=integrity,
                                deep=deep, replay=replay, progress=RichProgress(err))
    for report in reports:
        bad = {p.block_hash for p in report.problems}
        out.print(f"{report.dataset_id}: {len(report.blocks)} blocks", markup=False)
        for cb, author in zip(report.blocks, report.authors, strict=True):
            mark = "BAD" if cb.hash in bad else "ok "
            signer = f" {author.signer.hex()[:12]}" if author.signer else ""
            out.print(f"  {mark} {cb.hash.hex()[:12]} {format_timestamp(cb.block.system_time)} "
                      f"{author.status.value}{signer}", markup=False)
        for p in report.problems:
            out.print(f"  problem: {p}", markup=False)
        out.print(f"  integrity: {'FAILED' if report.problems else 'ok'}", markup=False)
        _print_authorship(report)
        out.print(f"  reproducibility: {report.reproducibility}", markup=False)
        if engine.identity is not None and report.reproducibility == "reproduced":
            ds = ws.dataset(report.dataset_id)
            out.print(f"  replayed with {replaying.engine_note(ds, engine.identity)}", markup=False)
            if engine_spec:
                h = replaying.record_compatibility(ds, engine.identity)
                out.print(f"  recorded compatibility with this engine in block {h.hex()[:12]}")
    failed = [r for r in reports if not r.ok]
    if failed:
        first = failed[0]
        raise VerifyFailed(f"{first.dataset_id}: first bad {first.first_problem}")


def _print_authorship(report: VerifyReport) -> None:
    """One line for the verdict under ``trust.require``, then one per signer unless all trusted."""
    from ..trust.authorship import Authorship

    trusted = all(s.status is Authorship.TRUSTED for s in report.signers)
    verdict = "FAILED" if report.authorship_problems else "ok" if trusted else "ok, with warnings"
    out.print(f"  authorship: {verdict} (trust.require: {report.policy.value})", markup=False)
    for s in report.signers:
        out.print(f"    {signer_line(s)}", markup=False)
    for p in report.authorship_problems:
        out.print(f"  problem: {p}", markup=False)


def _engine_settings(ws, spec: str):
    """``sandbox``, ``container`` or ``container:IMAGE`` over the workspace's engine settings."""
    import dataclasses

    from ..engine.session import engine_settings

    runtime, _, image = spec.partition(":")
    if runtime not in ("sandbox", "container") or (image and runtime != "container"):
        raise click.UsageError(f"--engine {spec}: expected sandbox, container or container:IMAGE")
    settings = dataclasses.replace(engine_settings(ws), runtime=runtime)
    return dataclasses.replace(settings, image=image) if image else settings


def register(cli_group: click.Group) -> None:
    """Add ``repo``, ``push`` and ``verify`` to the ``coord`` command group."""
    for command in (repo, push, verify_):
        cli_group.add_command(command)
