"""``modelport versions list owner/name``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import model_path


@click.command("list")
@click.argument("model")
@click.pass_obj
def list_versions(app: Application, model: str) -> None:
    """List the versions of MODEL (owner/name), oldest first."""
    body = app.check(app.http.get(f"{model_path(app, model)}/versions"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["version", "state", "format", "license", "digest", "created_at"],
        [
            [
                v["version"],
                v["state"],
                v["format"],
                v["license"],
                v["manifest_digest"][:19],
                v["created_at"],
            ]
            for v in body["items"]
        ],
    )
