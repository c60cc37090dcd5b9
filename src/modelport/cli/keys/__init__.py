"""``modelport keys``: API keys (create, list, rotate, revoke)."""

from __future__ import annotations

import click

from modelport.cli.keys.create import create
from modelport.cli.keys.list import list_keys
from modelport.cli.keys.revoke import revoke
from modelport.cli.keys.rotate import rotate


@click.group()
def keys() -> None:
    """API keys of tenant members and service accounts."""


keys.add_command(create)
keys.add_command(list_keys)
keys.add_command(rotate)
keys.add_command(revoke)
