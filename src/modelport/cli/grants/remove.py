"""``modelport grants remove ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.argument("grant_id", type=int)
@click.pass_obj
def remove(app: Application, grant_id: int) -> None:
    """Withdraw grant GRANT_ID (only the granting tenant may)."""
    app.client.grants.remove(grant_id)
    if app.terminal.as_json:
        app.terminal.json({"id": grant_id, "removed": True})
        return
    app.terminal.success(f"grant {grant_id} removed")
