"""``coord completions SHELL``: the script that makes the shell complete coord's commands,
options and dataset ids (click's completion, asked through ``$_COORD_COMPLETE``)."""
from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completions(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL; e.g. in ~/.bashrc: eval "$(coord completions bash)"."""
    from click.shell_completion import get_completion_class

    from .output import Output

    completion = get_completion_class(shell)
    assert completion is not None  # click knows every shell of SHELLS
    root = ctx.find_root().command
    Output().text(completion(root, {}, "coord", "_COORD_COMPLETE").source())
