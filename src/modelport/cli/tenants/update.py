"""``modelport tenants update SLUG [--name N] [--require-separation/--no-require-separation]
[--cache/--no-cache] [--shared-cache/--no-shared-cache]``."""

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
@click.option(
    "--cache/--no-cache",
    "cache",
    default=None,
    help="Whether the tenant's calls may be answered from (and stored in) the response cache.",
)
@click.option(
    "--shared-cache/--no-shared-cache",
    default=None,
    help="Whether the tenant shares cached answers with other tenants that opted in.",
)
@click.pass_obj
def update(
    app: Application,
    slug: str,
    name: str | None,
    require_separation: bool | None,
    cache: bool | None,
    shared_cache: bool | None,
) -> None:
    """Change the settings of the tenant SLUG (its owners or the platform admin)."""
    changes = {
        "name": name,
        "require_separation": require_separation,
        "no_cache": None if cache is None else not cache,
        "shared_cache": shared_cache,
    }
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
