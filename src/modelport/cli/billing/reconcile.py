"""``modelport billing reconcile --period P [--threshold PERCENT]``."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import click

from modelport.cli.application import Application
from modelport.cli.billing.offline import billing_on_database
from modelport.cli.billing.output import money


def parse_threshold(text: str) -> int:
    """``10%`` or ``10`` (percent) or ``250bps`` → basis points."""
    raw = text.strip().lower()
    try:
        if raw.endswith("bps"):
            value = Decimal(raw.removesuffix("bps"))
        else:
            value = Decimal(raw.removesuffix("%")) * 100
    except InvalidOperation:
        raise click.BadParameter(f"{text!r}: write a percentage (10%) or basis points") from None
    if not value.is_finite() or value != value.to_integral_value() or value < 0:
        raise click.BadParameter(f"{text!r} is not a whole number of basis points")
    return int(value)


@click.command()
@click.option("--period", required=True, help="YYYY-MM")
@click.option(
    "--threshold",
    default="10%",
    show_default=True,
    help="Flag a tenant whose reservations held more than this beyond their charges "
    "(a percentage of what they held, or basis points: 250bps).",
)
@click.pass_obj
def reconcile(app: Application, period: str, threshold: str) -> None:
    """Compare the reservations of PERIOD with what they settled and what the ledger
    charged; exit status 1 if a tenant is over the threshold or a reservation is wrong.

    Runs on the database itself (MODELPORT_DATABASE_URL), not through a server.
    """
    from modelport.api.routes.billing_json import reconciliation_json

    threshold_bps = parse_threshold(threshold)
    with billing_on_database(app) as billing:
        report = billing.reconcile(period, threshold_bps=threshold_bps)
    t = app.terminal
    if t.as_json:
        t.json(reconciliation_json(report))
    else:
        t.table(
            [
                "tenant",
                "reservations",
                "settled",
                "released",
                "expired",
                "held",
                "reserved",
                "charged",
                "ledger",
                "variance",
                "flag",
            ],
            [
                [
                    r.tenant,
                    r.reservations,
                    r.settled,
                    r.released,
                    r.expired,
                    r.held,
                    money(r.reserved_micros),
                    money(r.settled_micros),
                    money(r.ledger_micros),
                    f"{r.variance_bps / 100:g}%",
                    "over threshold" if r.flagged else "",
                ]
                for r in report.rows
            ],
            title=f"reservations in {report.period} (threshold {threshold_bps / 100:g}%)",
        )
        for f in report.findings:
            settled = "-" if f.settled_micros is None else money(f.settled_micros)
            t.warn(
                f"{f.anomaly.value}: reservation {f.reservation_id} of {f.tenant} held "
                f"{money(f.reserved_micros)}, settled {settled}, ledger {money(f.ledger_micros)}"
            )
    if report.flagged:
        raise SystemExit(1)
