"""``modelport tenants create SLUG [--name N] [--owner NAME] [--require-separation]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.argument("slug")
@click.option("--name", default="", help="Display name.")
@click.option("--owner", default=None, help="Add this member as the tenant's first owner.")
@click.option(
    "--require-separation",
    is_flag=True,
    help="Approvers may not approve versions they published themselves.",
)
@click.pass_obj
def create(
    app: Application, slug: str, name: str, owner: str | None, require_separation: bool
) -> None:
    """Create the tenant SLUG (which also owns the model namespace SLUG/)."""
    body = app.check(
        app.http.post(
            "/api/tenants",
            json={
                "slug": slug,
                "name": name,
                "owner": owner,
                "require_separation": require_separation,
            },
        )
    )
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(f"created tenant {body['slug']}" + (f" (owner: {owner})" if owner else ""))
