"""``modelport billing invoices show ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import print_invoice


@click.command()
@click.argument("invoice_id", type=int)
@click.pass_obj
def show(app: Application, invoice_id: int) -> None:
    """Show an invoice: its lines, credit notes and what is due."""
    body = app.check(app.http.get(f"/api/invoices/{invoice_id}"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_invoice(app, body)
