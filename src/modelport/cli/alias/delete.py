"""``modelport alias delete owner/name ALIAS``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import model_path


@click.command()
@click.argument("model")
@click.argument("alias")
@click.pass_obj
def delete(app: Application, model: str, alias: str) -> None:
    """Remove ALIAS of MODEL (owner/name); the version it pointed at stays."""
    model_path(app, model)
    app.client.aliases.delete(model, alias)
    if app.terminal.as_json:
        app.terminal.json({"model": model, "alias": alias, "deleted": True})
        return
    app.terminal.success(f"{model}: alias {alias} deleted")
