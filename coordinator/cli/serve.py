"""``coord serve``: keep the workspace's datasets up to date, with an HTTP API and a web view."""
from __future__ import annotations

from pathlib import Path

import click

from .context import writable_workspace


@click.command("serve")
@click.option("--port", default=8321, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0: any free one; the address is printed).")
@click.option("--bind", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback needs --token-file.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="File holding the bearer token every request must carry (mode 600).")
@click.option("--allow-writes", is_flag=True, help="Accept POSTs that queue pulls or push data.")
@click.pass_context
def serve(ctx: click.Context, port: int, bind: str, token_file: Path | None, allow_writes: bool) -> None:
    """Run the build service: pull roots on a schedule and when files arrive, derive what is
    out of date with one warm engine, and serve the API (/docs) and a live web view (/)."""
    from ..serve.server import Listen
    from ..serve.server import serve as run

    run(writable_workspace(ctx), Listen(bind, port, token_file, allow_writes))
