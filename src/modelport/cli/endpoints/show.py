"""``modelport endpoints show NAME``: the endpoint and its latest deployment's status."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.endpoints.output import print_deployment, print_endpoint


@click.command()
@click.argument("name")
@click.pass_obj
def show(app: Application, name: str) -> None:
    """Show endpoint NAME: its traffic and the status of its newest deployment."""
    endpoint = app.client.endpoints.get(name)
    history = app.client.endpoints.deployments(name)
    latest = history[0] if history else None
    if app.terminal.as_json:
        app.terminal.json({**endpoint.raw, "latest_deployment": latest and latest.raw})
        return
    print_endpoint(app, endpoint)
    if latest is not None:
        print_deployment(app, latest)
