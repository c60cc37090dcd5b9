"""``modelport billing recompute --period P``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.offline import billing_on_database


@click.command()
@click.option("--period", required=True, help="YYYY-MM")
@click.pass_obj
def recompute(app: Application, period: str) -> None:
    """Rebuild every invoice and statement of PERIOD from the raw usage events and list
    every difference from what is stored; exit status 1 if there is any.

    Runs on the database itself (MODELPORT_DATABASE_URL), not through a server.
    """
    from modelport.api.routes.billing_json import recompute_json

    with billing_on_database(app) as billing:
        report = billing.recompute(period)
    t = app.terminal
    if t.as_json:
        t.json(recompute_json(report))
    else:
        t.info(
            f"{report.period}: {report.events} usage events, {report.invoices} invoices, "
            f"{report.statements} statements"
        )
        if report.differences:
            t.table(
                ["document", "status", "kind", "item", "stored", "recomputed"],
                [
                    [d.document, d.status, d.kind.value, d.item, d.stored, d.recomputed]
                    for d in report.differences
                ],
            )
        else:
            t.success("stored invoices and statements equal their rebuild from the ledger")
    if report.differences:
        t.warn(f"{len(report.differences)} difference(s)")
        raise SystemExit(1)
