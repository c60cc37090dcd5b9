"""``modelport secrets generate-key``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("generate-key")
@click.pass_obj
def generate_key(app: Application) -> None:
    """Print a new secret key (Fernet) for MODELPORT_SECRET_KEY. To rotate, put it
    first (``new,old``) on every process, restart them, then run ``secrets rotate``."""
    from modelport.store.secrets import generate_key as make

    key = make()
    if app.terminal.as_json:
        app.terminal.json({"key": key})
    else:
        click.echo(key)
