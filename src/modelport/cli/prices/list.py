"""``modelport prices list owner/name [--version V]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import money
from modelport.cli.models.refs import model_path


@click.command("list")
@click.argument("model")
@click.option("--version", default=None, help="One version's rules.")
@click.pass_obj
def list_prices(app: Application, model: str, version: str | None) -> None:
    """List the price rules of MODEL (owner/name), oldest first."""
    model_path(app, model)
    rules = app.client.prices.list(model, version)
    if app.terminal.as_json:
        app.terminal.json({"items": [r.raw for r in rules]})
        return
    app.terminal.table(
        ["id", "version", "unit", "price", "per", "effective_from"],
        [
            [
                r.id,
                r.version or "(all)",
                r.unit,
                money(r.unit_price_micros),
                r.per_units,
                r.effective_from,
            ]
            for r in rules
        ],
    )
