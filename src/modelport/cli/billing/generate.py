"""``modelport billing generate --period P``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money


@click.command()
@click.option("--period", required=True, help="YYYY-MM")
@click.pass_obj
def generate(app: Application, period: str) -> None:
    """Rebuild the draft invoices and statements of PERIOD from the ledger (platform
    admin); finalised ones are kept as they are."""
    body = app.check(app.http.post("/api/billing/generate", json={"period": period}))
    t = app.terminal
    if t.as_json:
        t.json(body)
        return
    for invoice in body["invoices"]:
        t.info(f"invoice {invoice['id']}  {invoice['tenant']}  {money(invoice['total_micros'])}")
    for statement in body["statements"]:
        t.info(
            f"statement {statement['id']}  {statement['publisher']}  "
            f"{money(statement['revenue_micros'])}"
        )
    for kept in body["kept"]:
        t.info(f"{kept}: finalized, kept")
    t.success(
        f"{period}: {len(body['invoices'])} invoice(s), {len(body['statements'])} statement(s)"
    )
