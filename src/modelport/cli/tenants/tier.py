"""``modelport tenants tier SLUG TIER``."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application
from modelport.cli.tenants.output import print_tenant


@click.command()
@click.argument("slug")
@click.argument("tier", type=click.Choice(["free", "standard", "premium"]))
@click.pass_obj
def tier(app: Application, slug: str, tier: str) -> None:
    """Move the tenant SLUG to TIER (platform admin): under load, the calls of the tiers
    a degradation policy names give way (free, by default)."""
    path = f"/api/tenants/{quote(slug, safe='')}/tier"
    body = app.check(app.http.put(path, json={"tier": tier}))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_tenant(app, body)
