"""``modelport tenants suspend SLUG --reason R`` and ``modelport tenants reactivate SLUG``."""

from __future__ import annotations

from urllib.parse import quote

import click
import httpx

from modelport.cli.application import Application
from modelport.cli.tenants.output import print_tenant


@click.command()
@click.argument("slug")
@click.option("--reason", required=True, help="Why (kept with the tenant and in the audit log).")
@click.pass_obj
def suspend(app: Application, slug: str, reason: str) -> None:
    """Suspend the tenant SLUG (platform admin): its keys and tokens stop working at once,
    its queued jobs wait."""
    _show(app, app.http.post(f"{_path(slug)}/suspend", json={"reason": reason}))


@click.command()
@click.argument("slug")
@click.pass_obj
def reactivate(app: Application, slug: str) -> None:
    """Lift the suspension of the tenant SLUG (platform admin)."""
    _show(app, app.http.post(f"{_path(slug)}/reactivate"))


def _path(slug: str) -> str:
    return f"/api/tenants/{quote(slug, safe='')}"


def _show(app: Application, response: httpx.Response) -> None:
    """The tenant as the API answered it (or the API's error, and a non-zero exit)."""
    body = app.check(response)
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_tenant(app, body)
