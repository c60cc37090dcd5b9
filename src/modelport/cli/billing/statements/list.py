"""``modelport billing statements list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money


@click.command("list")
@click.option("--publisher", help="Default: the key's own tenant (the admin: every one).")
@click.option("--period", help="YYYY-MM")
@click.pass_obj
def list_statements(app: Application, publisher: str | None, period: str | None) -> None:
    """List statements, newest period first."""
    params = {k: v for k, v in {"publisher": publisher, "period": period}.items() if v}
    body = app.check(app.http.get("/api/statements", params=params))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["id", "publisher", "period", "status", "calls", "revenue", "publisher", "platform"],
        [
            [
                s["id"],
                s["publisher"],
                s["period"],
                s["status"],
                s["events"],
                money(s["revenue_micros"]),
                money(s["publisher_share_micros"]),
                money(s["platform_take_micros"]),
            ]
            for s in body["items"]
        ],
    )
