"""``modelport billing invoices list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money


@click.command("list")
@click.option("--tenant", help="Default: the key's own tenant (the admin: every tenant).")
@click.option("--period", help="YYYY-MM")
@click.option("--status", type=click.Choice(["draft", "finalized"]))
@click.pass_obj
def list_invoices(
    app: Application, tenant: str | None, period: str | None, status: str | None
) -> None:
    """List invoices, newest period first."""
    params = {k: v for k, v in {"tenant": tenant, "period": period, "status": status}.items() if v}
    body = app.check(app.http.get("/api/invoices", params=params))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["id", "tenant", "period", "status", "events", "total", "credited", "due"],
        [
            [
                i["id"],
                i["tenant"],
                i["period"],
                i["status"],
                i["events"],
                money(i["total_micros"]),
                money(i["credited_micros"]),
                money(i["due_micros"]),
            ]
            for i in body["items"]
        ],
    )
