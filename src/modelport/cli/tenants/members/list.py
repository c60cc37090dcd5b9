"""``modelport tenants members list TENANT``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.tenants.members.paths import members_path
from modelport.cli.tenants.output import print_members


@click.command("list")
@click.argument("tenant")
@click.pass_obj
def list_members(app: Application, tenant: str) -> None:
    """List the members and service accounts of TENANT."""
    body = app.check(app.http.get(members_path(tenant)))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_members(app, body["items"])
