"""``modelport limits list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.option("--tenant", default=None, help="The platform admin: one tenant's.")
@click.option("--scope-type", type=click.Choice(["tenant", "key", "model"]), default=None)
@click.pass_obj
def list_limits(app: Application, tenant: str | None, scope_type: str | None) -> None:
    """List the limits set for the caller's tenant, its keys and its models."""
    rows = app.client.limits.list(tenant=tenant, scope_type=scope_type)
    if app.terminal.as_json:
        app.terminal.json({"items": [r.raw for r in rows]})
        return
    app.terminal.table(
        ["scope", "id", "rpm", "tpm", "concurrency", "jobs", "job concurrency"],
        [
            [r.scope_type, r.scope_id, r.rpm, r.tpm, r.concurrency, r.jobs, r.job_concurrency]
            for r in rows
        ],
    )
