"""``modelport tenants list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.pass_obj
def list_tenants(app: Application) -> None:
    """List tenants (all for the platform admin; one's own otherwise)."""
    body = app.check(app.http.get("/api/tenants"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["slug", "name", "require_separation", "created_at"],
        [
            [t["slug"], t["name"], str(t["require_separation"]).lower(), t["created_at"]]
            for t in body["items"]
        ],
    )
