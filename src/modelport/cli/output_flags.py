"""``--json`` and ``--wide`` wherever a user types them: before the verb (the top
group's options) or after it (added here to every group and command of the tree)."""

from __future__ import annotations

import click

from modelport.cli.application import Application


def _json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    app = ctx.find_object(Application)
    if value and app is not None:
        app.terminal.as_json = True


def _wide(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    app = ctx.find_object(Application)
    if value and app is not None:
        app.terminal.wide = True


def _flags() -> list[click.Option]:
    # ``expose_value=False``: the commands' signatures stay as they are; the callbacks
    # set the flag on the terminal that every command prints through.
    return [
        click.Option(
            ["--json"], is_flag=True, expose_value=False, callback=_json,
            help="Machine-readable output.",
        ),
        click.Option(
            ["--wide"], is_flag=True, expose_value=False, callback=_wide,
            help="Never shorten a table's cells, even on a terminal.",
        ),
    ]  # fmt: skip


def add_output_flags(command: click.Command) -> None:
    """Give ``command`` and every command below it the flags it does not declare."""
    names: set[str] = {opt for p in command.params for opt in getattr(p, "opts", [])}
    command.params.extend(flag for flag in _flags() if flag.opts[0] not in names)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_output_flags(sub)
