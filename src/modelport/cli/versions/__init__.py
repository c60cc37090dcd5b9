"""``modelport versions``: list, show and move versions through their lifecycle."""

from __future__ import annotations

import click

from modelport.cli.versions.list import list_versions
from modelport.cli.versions.show import show
from modelport.cli.versions.transition import transition


@click.group()
def versions() -> None:
    """Model versions."""


versions.add_command(list_versions)
versions.add_command(show)
versions.add_command(transition)
