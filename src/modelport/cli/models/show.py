"""``modelport models show owner/name``: a model with its versions and aliases."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import model_path


@click.command()
@click.argument("model")
@click.pass_obj
def show(app: Application, model: str) -> None:
    """Show MODEL (owner/name), its versions and aliases."""
    path = model_path(app, model)
    body = app.check(app.http.get(path))
    body["versions"] = app.check(app.http.get(f"{path}/versions"))["items"]
    body["aliases"] = app.check(app.http.get(f"{path}/aliases"))["items"]
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    t = app.terminal
    t.info(f"[bold]{body['model']}[/bold]  ({body['visibility']})")
    for label in ("task", "license", "description", "created_at", "created_by"):
        if body[label]:
            t.info(f"{label}: {body[label]}")
    if body["tags"]:
        t.info("tags: " + ", ".join(body["tags"]))
    if body["aliases"]:
        t.info("aliases: " + ", ".join(f"{a['alias']} -> {a['version']}" for a in body["aliases"]))
    t.table(
        ["version", "state", "format", "license", "created_at"],
        [
            [v["version"], v["state"], v["format"], v["license"], v["created_at"]]
            for v in body["versions"]
        ],
        title="versions",
    )
