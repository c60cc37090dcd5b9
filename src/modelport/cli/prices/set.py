"""``modelport prices set owner/name --unit U --price P [--per N] [--version V]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money, parse_money
from modelport.cli.models.refs import model_path

UNITS = (
    "prediction",
    "input_token",
    "output_token",
    "image",
    "second",
    "compute_ms",
    "cache_hit",
    "row",
)


@click.command("set")
@click.argument("model")
@click.option("--unit", type=click.Choice(UNITS), default="prediction", show_default=True)
@click.option("--price", required=True, help="Amount per --per units, e.g. 0.002.")
@click.option("--per", "per_units", type=click.IntRange(min=1), default=None, help="Units priced.")
@click.option("--version", default=None, help="Default: every version without its own rule.")
@click.option("--effective-from", default=None, help="ISO time (default now).")
@click.pass_obj
def set_price(
    app: Application,
    model: str,
    unit: str,
    price: str,
    per_units: int | None,
    version: str | None,
    effective_from: str | None,
) -> None:
    """Add a price rule to MODEL (owner/name); it replaces the one in force from
    --effective-from on."""
    model_path(app, model)
    micros = parse_money(price)
    rule = app.client.prices.set(
        model,
        unit,
        micros,
        version=version,
        per_units=per_units,
        effective_from=effective_from,
    )
    if app.terminal.as_json:
        app.terminal.json(rule.raw)
        return
    per = f"{rule.per_units} {rule.unit}" if rule.per_units != 1 else rule.unit
    scope = f"{model}:{rule.version}" if rule.version else model
    app.terminal.success(f"{scope}: {money(rule.unit_price_micros)} per {per} (rule {rule.id})")
