"""``modelport alias list owner/name``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import model_path


@click.command("list")
@click.argument("model")
@click.pass_obj
def list_aliases(app: Application, model: str) -> None:
    """List the aliases of MODEL (owner/name) and the versions they point at."""
    model_path(app, model)
    aliases = app.client.aliases.list(model)
    if app.terminal.as_json:
        app.terminal.json({"items": [a.raw for a in aliases]})
        return
    app.terminal.table(
        ["alias", "version", "updated_at"],
        [[a.alias, a.version, a.raw.get("updated_at")] for a in aliases],
    )
