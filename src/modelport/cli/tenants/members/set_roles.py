"""``modelport tenants members set-roles TENANT NAME --role R [--role R...]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.tenants.members.paths import members_path
from modelport.tenancy.policy import ROLE_PERMISSIONS


@click.command("set-roles")
@click.argument("tenant")
@click.argument("name")
@click.option(
    "--role",
    "roles",
    multiple=True,
    required=True,
    type=click.Choice(sorted(ROLE_PERMISSIONS)),
    help="A role in the tenant (repeat for several).",
)
@click.pass_obj
def set_roles(app: Application, tenant: str, name: str, roles: tuple[str, ...]) -> None:
    """Replace the roles of NAME in TENANT (its keys follow at once)."""
    body = app.check(app.http.patch(members_path(tenant, name), json={"roles": list(roles)}))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(f"{body['principal']}: {', '.join(body['roles'])}")
