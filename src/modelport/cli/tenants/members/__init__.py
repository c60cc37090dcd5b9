"""``modelport tenants members``: members and service accounts of a tenant, with roles."""

from __future__ import annotations

import click

from modelport.cli.tenants.members.add import add
from modelport.cli.tenants.members.list import list_members
from modelport.cli.tenants.members.remove import remove
from modelport.cli.tenants.members.set_roles import set_roles


@click.group()
def members() -> None:
    """Members and service accounts of a tenant, and their roles."""


members.add_command(list_members)
members.add_command(add)
members.add_command(set_roles)
members.add_command(remove)
