"""``modelport tenants``: tenants and their members (platform admin, tenant owners)."""

from __future__ import annotations

import click

from modelport.cli.tenants.create import create
from modelport.cli.tenants.list import list_tenants
from modelport.cli.tenants.members import members
from modelport.cli.tenants.show import show
from modelport.cli.tenants.suspend import reactivate, suspend
from modelport.cli.tenants.tier import tier
from modelport.cli.tenants.update import update


@click.group()
def tenants() -> None:
    """Tenants (organisations), their members and service accounts."""


tenants.add_command(create)
tenants.add_command(list_tenants)
tenants.add_command(show)
tenants.add_command(update)
tenants.add_command(members)
tenants.add_command(suspend)
tenants.add_command(reactivate)
tenants.add_command(tier)
