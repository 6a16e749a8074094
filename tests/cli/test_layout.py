"""The command line's layout: a module per command (or group of commands), each registered in
one place, ``COMMANDS`` of ``coordinator/cli/main.py``."""
from __future__ import annotations

import importlib
import pkgutil

import click

import coordinator.cli
from coordinator.cli.main import COMMANDS, cli


def test_every_command_a_module_defines_is_in_the_table_and_nothing_else_is_registered():
    defined: dict[int, click.Command] = {}
    subcommands: set[int] = set()
    for info in pkgutil.iter_modules(coordinator.cli.__path__):
        if info.name in ("__main__", "main"):  # __main__ runs the command line when imported
            continue
        for value in vars(importlib.import_module(f"coordinator.cli.{info.name}")).values():
            if isinstance(value, click.Command):
                defined[id(value)] = value
                if isinstance(value, click.Group):
                    subcommands.update(id(c) for c in value.commands.values())
    top_level = [c for i, c in defined.items() if i not in subcommands]
    assert {id(c) for c in top_level} == {id(c) for c in COMMANDS}
    assert list(cli.commands.values()) == list(COMMANDS)  # no other registration, no name twice
