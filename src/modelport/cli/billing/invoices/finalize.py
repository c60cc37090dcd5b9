"""``modelport billing invoices finalize ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money


@click.command()
@click.argument("invoice_id", type=int)
@click.pass_obj
def finalize(app: Application, invoice_id: int) -> None:
    """Make an invoice final (platform admin; once its period has closed). A finalised
    invoice never changes again: correct it with a credit note."""
    body = app.check(app.http.post(f"/api/invoices/{invoice_id}/finalize"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(
        f"invoice {body['id']} ({body['tenant']}, {body['period']}) finalized: "
        f"{money(body['total_micros'])}"
    )
