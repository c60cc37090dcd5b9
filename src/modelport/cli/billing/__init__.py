"""``modelport billing``: invoices, publisher statements, prepaid balances, and the
operator's recompute and reconciliation.

``recompute`` and ``reconcile`` run on the database itself (like ``migrate``); every
other verb talks to a server with ``--url`` and ``--api-key``.
"""

from __future__ import annotations

import click

from modelport.cli.billing.balance import balance
from modelport.cli.billing.credit import credit
from modelport.cli.billing.generate import generate
from modelport.cli.billing.invoices import invoices
from modelport.cli.billing.recompute import recompute
from modelport.cli.billing.reconcile import reconcile
from modelport.cli.billing.statements import statements


@click.group()
def billing() -> None:
    """Invoices, statements, balances, recompute and reconciliation."""


billing.add_command(invoices)
billing.add_command(statements)
billing.add_command(generate)
billing.add_command(recompute)
billing.add_command(reconcile)
billing.add_command(credit)
billing.add_command(balance)
