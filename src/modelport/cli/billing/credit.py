"""``modelport billing credit TENANT AMOUNT``."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money, parse_money


@click.command()
@click.argument("tenant")
@click.argument("amount")
@click.option("--micros", is_flag=True, help="AMOUNT is in micro-units, not currency units.")
@click.option("--reason", default="", help="Recorded in the audit log.")
@click.pass_obj
def credit(app: Application, tenant: str, amount: str, micros: bool, reason: str) -> None:
    """Add AMOUNT, such as 25 or 12.50, to TENANT's prepaid balance (platform admin;
    audited)."""
    if micros:
        if not amount.isdigit():
            raise click.BadParameter(f"{amount!r} is not a whole number of micro-units")
        value = int(amount)
    else:
        value = parse_money(amount)
    path = f"/api/balances/{quote(tenant, safe='')}/credits"
    body = app.check(app.http.post(path, json={"amount_micros": value, "reason": reason}))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(
        f"credited {money(value)} to {body['tenant']}: balance {money(body['balance_micros'])}"
    )
