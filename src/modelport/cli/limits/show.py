"""``modelport limits show SCOPE_TYPE SCOPE_ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.limits.output import SCOPE, print_limits


@click.command()
@click.argument("scope_type", type=SCOPE)
@click.argument("scope_id")
@click.pass_obj
def show(app: Application, scope_type: str, scope_id: str) -> None:
    """Show the limits of a tenant, key or model."""
    limits = app.client.limits.get(scope_type, scope_id)
    if app.terminal.as_json:
        app.terminal.json(limits.raw)
        return
    print_limits(app, limits)
