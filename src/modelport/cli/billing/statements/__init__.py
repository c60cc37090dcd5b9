"""``modelport billing statements``: publishers' statements."""

from __future__ import annotations

import click

from modelport.cli.billing.statements.list import list_statements
from modelport.cli.billing.statements.show import show


@click.group()
def statements() -> None:
    """Publishers' revenue per period, with their share and the platform's take."""


statements.add_command(list_statements)
statements.add_command(show)
