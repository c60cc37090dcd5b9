"""``modelport endpoints deployments NAME``: the deployment history."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.argument("name")
@click.pass_obj
def deployments(app: Application, name: str) -> None:
    """List the deployments of endpoint NAME, newest first."""
    found = app.client.endpoints.deployments(name)
    if app.terminal.as_json:
        app.terminal.json({"items": [d.raw for d in found]})
        return
    app.terminal.table(
        ["id", "state", "versions", "created_at"],
        [
            [
                d.id,
                d.state,
                ", ".join(f"{v['model']}:{v['version']} {v['weight']}%" for v in d.versions),
                d.raw.get("created_at"),
            ]
            for d in found
        ],
    )
