"""``modelport alias``: list, point and delete named aliases of versions."""

from __future__ import annotations

import click

from modelport.cli.alias.delete import delete
from modelport.cli.alias.list import list_aliases
from modelport.cli.alias.set import set_alias


@click.group()
def alias() -> None:
    """Model aliases (e.g. prod, default)."""


alias.add_command(list_aliases)
alias.add_command(set_alias)
alias.add_command(delete)
