"""``modelport endpoints``: endpoints, their deployments (a traffic split or a canary),
their status and rollback."""

from __future__ import annotations

import click

from modelport.cli.endpoints.create import create
from modelport.cli.endpoints.deploy import deploy
from modelport.cli.endpoints.deployments import deployments
from modelport.cli.endpoints.list import list_endpoints
from modelport.cli.endpoints.rollback import rollback
from modelport.cli.endpoints.show import show
from modelport.cli.endpoints.slo_rules import slo_rules


@click.group()
def endpoints() -> None:
    """Endpoints: stable names that serve the versions deployed to them."""


endpoints.add_command(create)
endpoints.add_command(list_endpoints)
endpoints.add_command(show)
endpoints.add_command(deploy)
endpoints.add_command(deployments)
endpoints.add_command(rollback)
endpoints.add_command(slo_rules)
