"""``modelport billing balance TENANT``."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money


@click.command()
@click.argument("tenant")
@click.pass_obj
def balance(app: Application, tenant: str) -> None:
    """Show TENANT's prepaid balance and its keys' allowances."""
    body = app.check(app.http.get(f"/api/balances/{quote(tenant, safe='')}"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    if not body["items"]:
        app.terminal.info(f"{body['tenant']} has no prepaid balance")
        return
    app.terminal.table(
        ["scope", "id", "balance", "reserved", "overdraft", "available"],
        [
            [
                b["scope"],
                b["scope_id"],
                money(b["balance_micros"]),
                money(b["reserved_micros"]),
                money(b["overdraft_micros"]),
                money(b["available_micros"]),
            ]
            for b in body["items"]
        ],
    )
