"""``modelport secrets``: the keys that seal stored secrets (remote backends' API keys,
webhook signing secrets). Runs on the database itself (like ``migrate``)."""

from __future__ import annotations

import click

from modelport.cli.secrets.generate_key import generate_key
from modelport.cli.secrets.rotate import rotate


@click.group()
def secrets() -> None:
    """Seal stored secrets with the newest key; make a key."""


secrets.add_command(rotate)
secrets.add_command(generate_key)
