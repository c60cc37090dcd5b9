"""How billing is printed (shared by the ``billing`` verbs); amounts in micro-units are
shown as currency units with six decimals, exactly (integer arithmetic)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import click

from modelport.cli.application import Application

MICROS = 1_000_000


def money(micros: int) -> str:
    """``4500`` → ``0.004500``; exact for any integer."""
    sign = "-" if micros < 0 else ""
    whole, fraction = divmod(abs(micros), MICROS)
    return f"{sign}{whole}.{fraction:06d}"


def parse_money(text: str) -> int:
    """``12.5`` → ``12500000`` micro-units; at most six decimals, never via a float."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise click.BadParameter(f"{text!r} is not an amount such as 25 or 12.50") from None
    micros = value * MICROS
    if not value.is_finite() or micros != micros.to_integral_value():
        raise click.BadParameter(f"{text!r} has more than six decimals")
    return int(micros)


def _price(line: dict[str, Any]) -> str:
    """``0.001000``, ``0.000003/1000`` per that many units, ``x 25%`` for a failure rate."""
    price = money(line["unit_price_micros"])
    if line["per_units"] != 1:
        price += f"/{line['per_units']}"
    if line["charge_bps"] != 10_000:
        price += f" x {line['charge_bps'] / 100:g}%"
    return price


def print_invoice(app: Application, invoice: dict[str, Any]) -> None:
    t = app.terminal
    t.info(
        f"[bold]invoice {invoice['id']}[/bold]  {invoice['tenant']}  {invoice['period']}  "
        f"{invoice['status']}"
    )
    t.table(
        ["#", "model", "unit", "quantity", "price", "amount"],
        [
            [
                x["line"],
                f"{x['model']}:{x['version']}",
                x["unit"],
                x["quantity"],
                _price(x),
                money(x["amount_micros"]),
            ]
            for x in invoice["lines"]
        ],
    )
    t.info(f"total: {money(invoice['total_micros'])}")
    for note in invoice.get("credit_notes", []):
        t.info(f"credit note {note['id']}: -{money(note['total_micros'])}  {note['reason']}")
    t.info(f"due: {money(invoice['due_micros'])}")
    if invoice["finalized_at"]:
        t.info(f"finalized_at: {invoice['finalized_at']} by {invoice['finalized_by']}")
    else:
        t.info(f"generated_at: {invoice['generated_at']}")


def print_statement(app: Application, statement: dict[str, Any]) -> None:
    t = app.terminal
    t.info(
        f"[bold]statement {statement['id']}[/bold]  {statement['publisher']}  "
        f"{statement['period']}  {statement['status']}"
    )
    t.table(
        ["#", "model", "unit", "calls", "revenue", "share", "publisher", "platform"],
        [
            [
                x["line"],
                f"{x['model']}:{x['version']}",
                x["unit"],
                x["events"],
                money(x["revenue_micros"]),
                f"{x['revenue_share_bps'] / 100:g}%",
                money(x["publisher_share_micros"]),
                money(x["platform_take_micros"]),
            ]
            for x in statement["lines"]
        ],
    )
    t.info(
        f"revenue: {money(statement['revenue_micros'])}  "
        f"publisher: {money(statement['publisher_share_micros'])}  "
        f"platform: {money(statement['platform_take_micros'])}"
    )
