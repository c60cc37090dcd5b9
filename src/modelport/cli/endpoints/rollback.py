"""``modelport endpoints rollback NAME``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.endpoints.output import print_endpoint


@click.command()
@click.argument("name")
@click.option(
    "--deployment", type=int, default=None, help="The active deployment (default: read it)."
)
@click.pass_obj
def rollback(app: Application, name: str, deployment: int | None) -> None:
    """Restore, at once, the deployment the active one of endpoint NAME replaced (while the
    rollback window is open)."""
    if deployment is None:
        deployment = app.client.endpoints.get(name).active_deployment
        if deployment is None:
            app.terminal.abort(f"endpoint {name} has no active deployment to roll back")
    done = app.client.endpoints.rollback(name, deployment)
    if app.terminal.as_json:
        app.terminal.json(done.raw)
        return
    app.terminal.success(f"rolled back deployment {done.rolled_back.id} of {name}")
    print_endpoint(app, done.endpoint)
