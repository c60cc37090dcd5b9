"""``modelport tenants update SLUG [--name N] [--require-separation/--no-require-separation]``."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application
from modelport.cli.tenants.output import print_tenant


@click.command()
@click.argument("slug")
@click.option("--name", default=None, help="New display name.")
@click.option(
    "--require-separation/--no-require-separation",
    default=None,
    help="Whether approvers may approve versions they published themselves.",
)
@click.pass_obj
def update(app: Application, slug: str, name: str | None, require_separation: bool | None) -> None:
    """Change the settings of the tenant SLUG (its owners or the platform admin)."""
    changes = {"name": name, "require_separation": require_separation}
    body = app.check(
        app.http.patch(
            f"/api/tenants/{quote(slug, safe='')}",
            json={k: v for k, v in changes.items() if v is not None},
        )
    )
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_tenant(app, body)
