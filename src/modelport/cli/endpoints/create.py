"""``modelport endpoints create NAME``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.argument("name")
@click.option("--tenant", default=None, help="Default: the caller's tenant (the admin names one).")
@click.option("--deadline-ms", type=click.IntRange(min=1), default=None, help="Longest call.")
@click.option("--description", default="")
@click.pass_obj
def create(
    app: Application, name: str, tenant: str | None, deadline_ms: int | None, description: str
) -> None:
    """Create endpoint NAME (lowercase letters, digits and '-'); deploy to it next."""
    endpoint = app.client.endpoints.create(
        name, tenant=tenant, deadline_ms=deadline_ms, description=description
    )
    if app.terminal.as_json:
        app.terminal.json(endpoint.raw)
        return
    app.terminal.success(f"created endpoint {endpoint.name} in {endpoint.tenant}")
    app.terminal.info(f"next: modelport endpoints deploy {endpoint.name} owner/name:VERSION")
