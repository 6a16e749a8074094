"""``coord config get|set``: the workspace settings (.coord/config.yaml)."""
from __future__ import annotations

import click

from .context import workspace
from .output import Output


@click.group()
def config() -> None:
    """Read or change the workspace settings (.coord/config.yaml), e.g. engine.runtime."""


@config.command("get")
@click.argument("key", required=False)
@click.pass_context
def config_get(ctx: click.Context, key: str | None) -> None:
    """Print a setting (dotted KEY such as engine.runtime), or all of them."""
    import yaml

    value = workspace(ctx).config().get(key)
    text = yaml.safe_dump(value, sort_keys=False).strip() if isinstance(value, (dict, list)) else str(value)
    Output().line(text)


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str) -> None:
    """Change a setting: VALUE is read as YAML (true, 2, local[2], {a: b})."""
    import yaml

    ws = workspace(ctx)
    cfg = ws.config().set(key, yaml.safe_load(value), where=str(ws.config_path))
    ws.save_config(cfg)
    Output().line(f"{key} = {cfg.get(key)}")
