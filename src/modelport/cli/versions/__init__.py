"""``modelport versions``: list, show, move through the lifecycle, validation reports,
load and unload."""

from __future__ import annotations

import click

from modelport.cli.versions.list import list_versions
from modelport.cli.versions.load import load, unload
from modelport.cli.versions.show import show
from modelport.cli.versions.transition import transition
from modelport.cli.versions.validation import validation


@click.group()
def versions() -> None:
    """Model versions."""


versions.add_command(list_versions)
versions.add_command(show)
versions.add_command(transition)
versions.add_command(validation)
versions.add_command(load)
versions.add_command(unload)
