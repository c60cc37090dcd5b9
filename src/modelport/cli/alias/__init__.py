"""``modelport alias``: point named aliases at versions."""

from __future__ import annotations

import click

from modelport.cli.alias.set import set_alias


@click.group()
def alias() -> None:
    """Model aliases (e.g. prod, default)."""


alias.add_command(set_alias)
