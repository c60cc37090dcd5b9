"""``modelport keys list [--tenant T] [--member M]``: keys, never their secrets."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.option("--tenant", default=None)
@click.option("--member", default=None)
@click.pass_obj
def list_keys(app: Application, tenant: str | None, member: str | None) -> None:
    """List API keys the caller may manage (its own; a tenant's for its owners)."""
    params = {k: v for k, v in {"tenant": tenant, "member": member}.items() if v is not None}
    body = app.check(app.http.get("/api/keys", params=params))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["id", "principal", "name", "scopes", "expires_at", "revoked_at"],
        [
            [
                k["id"],
                k["principal"],
                k["name"],
                "all" if k["scopes"] is None else ", ".join(k["scopes"]),
                k["expires_at"],
                k["revoked_at"],
            ]
            for k in body["items"]
        ],
    )
