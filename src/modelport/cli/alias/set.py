"""``modelport alias set owner/name ALIAS VERSION``."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import model_path


@click.command("set")
@click.argument("model")
@click.argument("alias")
@click.argument("version")
@click.pass_obj
def set_alias(app: Application, model: str, alias: str, version: str) -> None:
    """Point ALIAS of MODEL (owner/name) at VERSION."""
    path = f"{model_path(app, model)}/aliases/{quote(alias, safe='')}"
    body = app.check(app.http.put(path, json={"version": version}))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(f"{model}: {body['alias']} -> {body['version']}")
