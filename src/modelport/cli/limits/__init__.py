"""``modelport limits``: rate and concurrency limits of a tenant, a key or a model."""

from __future__ import annotations

import click

from modelport.cli.limits.list import list_limits
from modelport.cli.limits.set import set_limits
from modelport.cli.limits.show import show


@click.group()
def limits() -> None:
    """Requests per minute, tokens per minute and calls at once, per scope: tenant
    (its slug), key (its id) or model (owner/name, counted per calling tenant)."""


limits.add_command(list_limits)
limits.add_command(show)
limits.add_command(set_limits)
