"""``modelport billing statements show ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.billing.output import print_statement


@click.command()
@click.argument("statement_id", type=int)
@click.pass_obj
def show(app: Application, statement_id: int) -> None:
    """Show a statement: revenue per model version, the publisher's share, the take."""
    body = app.check(app.http.get(f"/api/statements/{statement_id}"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    print_statement(app, body)
