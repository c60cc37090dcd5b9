"""``modelport tenants members remove TENANT NAME``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.tenants.members.paths import members_path


@click.command()
@click.argument("tenant")
@click.argument("name")
@click.pass_obj
def remove(app: Application, tenant: str, name: str) -> None:
    """Remove NAME from TENANT; its API keys stop working at once."""
    app.check(app.http.delete(members_path(tenant, name)))
    if app.terminal.as_json:
        app.terminal.json({"tenant": tenant, "name": name, "removed": True})
        return
    app.terminal.success(f"removed {tenant}/{name} and revoked its keys")
