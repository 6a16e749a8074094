"""``coord repo add|list|delete``: the repositories datasets are pushed to and pulled from.

``coord push`` and ``coord pull REPO/DS`` are commands of their own (push.py, pull.py).
"""
from __future__ import annotations

import click

from .context import workspace
from .output import Output


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
    Output().line(f"added repository {r.name} ({r.url})")


@repo.command("list")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def repo_list(ctx: click.Context, output: str) -> None:
    """List repositories."""
    from .. import repository

    show = Output()
    repositories = repository.list_repositories(workspace(ctx))
    if output == "json":
        show.json([{"name": r.name, "url": r.url} for r in repositories])
    else:
        for r in repositories:
            show.line(f"{r.name}\t{r.url}")


@repo.command("delete")
@click.argument("name")
@click.pass_context
def repo_delete(ctx: click.Context, name: str) -> None:
    """Forget repository NAME (nothing in it is deleted)."""
    from .. import repository

    repository.delete_repository(workspace(ctx), name)
    Output().line(f"deleted repository {name}")
