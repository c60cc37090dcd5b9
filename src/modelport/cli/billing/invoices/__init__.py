"""``modelport billing invoices``: list, show and finalise invoices."""

from __future__ import annotations

import click

from modelport.cli.billing.invoices.finalize import finalize
from modelport.cli.billing.invoices.list import list_invoices
from modelport.cli.billing.invoices.show import show


@click.group()
def invoices() -> None:
    """Tenants' invoices per period (owners and billing members: their own)."""


invoices.add_command(list_invoices)
invoices.add_command(show)
invoices.add_command(finalize)
