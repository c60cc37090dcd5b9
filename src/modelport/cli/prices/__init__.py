"""``modelport prices``: a model's price rules."""

from __future__ import annotations

import click

from modelport.cli.prices.list import list_prices
from modelport.cli.prices.set import set_price


@click.group()
def prices() -> None:
    """What calling a model costs (amounts in currency units, six decimals)."""


prices.add_command(list_prices)
prices.add_command(set_price)
