"""``modelport grants``: share private models with another tenant."""

from __future__ import annotations

import click

from modelport.cli.grants.add import add
from modelport.cli.grants.list import list_grants
from modelport.cli.grants.remove import remove


@click.group()
def grants() -> None:
    """Grants: another tenant may see and call a model, or a whole namespace."""


grants.add_command(list_grants)
grants.add_command(add)
grants.add_command(remove)
