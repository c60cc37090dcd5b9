"""``modelport keys revoke KEY``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.keys.output import key_path


@click.command()
@click.argument("key")
@click.pass_obj
def revoke(app: Application, key: str) -> None:
    """Revoke KEY (a key id, or the key itself); it stops working at once."""
    body = app.check(app.http.delete(key_path(key)))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(f"revoked key {body['id']} ({body['name']}) of {body['principal']}")
