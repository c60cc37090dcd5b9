"""``modelport tenants members add TENANT NAME --role R [--role R...] [--service-account]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.tenants.members.paths import members_path
from modelport.tenancy.policy import ROLE_PERMISSIONS


@click.command()
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
@click.option("--service-account", is_flag=True, help="A machine identity, not a person.")
@click.pass_obj
def add(
    app: Application, tenant: str, name: str, roles: tuple[str, ...], service_account: bool
) -> None:
    """Add NAME to TENANT with the given roles."""
    kind = "service_account" if service_account else "member"
    body = app.check(
        app.http.post(members_path(tenant), json={"name": name, "kind": kind, "roles": list(roles)})
    )
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(f"added {body['principal']} ({kind}): {', '.join(body['roles'])}")
