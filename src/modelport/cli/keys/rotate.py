"""``modelport keys rotate KEY``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.keys.output import key_path, print_issued


@click.command()
@click.argument("key")
@click.pass_obj
def rotate(app: Application, key: str) -> None:
    """Replace KEY (a key id, or the key itself) with a new key; the old one stops working."""
    print_issued(app, app.check(app.http.post(f"{key_path(key)}/rotate")), "rotated to")
