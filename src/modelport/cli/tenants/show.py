"""``modelport tenants show SLUG``: a tenant and its members."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application
from modelport.cli.tenants.output import print_members, print_tenant


@click.command()
@click.argument("slug")
@click.pass_obj
def show(app: Application, slug: str) -> None:
    """Show the tenant SLUG and, if the key may see them, its members."""
    path = f"/api/tenants/{quote(slug, safe='')}"
    body = app.check(app.http.get(path))
    members = app.http.get(f"{path}/members")
    body["members"] = members.json()["items"] if members.is_success else None
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_tenant(app, body)
    if body["members"] is not None:
        print_members(app, body["members"])
