"""``modelport grants list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.option("--tenant", default=None, help="The platform admin: one tenant's grants.")
@click.pass_obj
def list_grants(app: Application, tenant: str | None) -> None:
    """List the grants given by or to the caller's tenant."""
    found = app.client.grants.list(tenant)
    if app.terminal.as_json:
        app.terminal.json({"items": [g.raw for g in found]})
        return
    app.terminal.table(
        ["id", "shared", "with", "created_at"],
        [
            [
                g.id,
                f"{g.namespace}/{g.model}" if g.model else f"{g.namespace}/*",
                g.grantee,
                g.raw.get("created_at"),
            ]
            for g in found
        ],
    )
