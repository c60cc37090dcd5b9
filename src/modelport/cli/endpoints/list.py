"""``modelport endpoints list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.option("--tenant", default=None, help="The platform admin: one tenant's only.")
@click.pass_obj
def list_endpoints(app: Application, tenant: str | None) -> None:
    """List the endpoints of the caller's tenant and where their traffic goes."""
    found = app.client.endpoints.list(tenant)
    if app.terminal.as_json:
        app.terminal.json({"items": [e.raw for e in found]})
        return
    app.terminal.table(
        ["endpoint", "tenant", "deployment", "traffic"],
        [
            [
                e.name,
                e.tenant,
                e.active_deployment,
                ", ".join(f"{s['model']}:{s['version']} {s['weight']}%" for s in e.traffic),
            ]
            for e in found
        ],
    )
