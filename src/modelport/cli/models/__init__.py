"""``modelport models``: browse the catalog."""

from __future__ import annotations

import click

from modelport.cli.models.list import list_models
from modelport.cli.models.search import search
from modelport.cli.models.show import show


@click.group()
def models() -> None:
    """Browse registered models."""


models.add_command(list_models)
models.add_command(show)
models.add_command(search)
