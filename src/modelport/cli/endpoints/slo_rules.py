"""``modelport endpoints slo-rules``: the Prometheus rule file of every endpoint's SLOs."""

from __future__ import annotations

from pathlib import Path

import click

from modelport.cli.application import Application
from modelport.client.errors import error_from_response


@click.command("slo-rules")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the file here instead of printing it.",
)
@click.pass_obj
def slo_rules(app: Application, output: Path | None) -> None:
    """Print the Prometheus rules (burn rates, error budgets, multi-window alerts) of
    every endpoint's SLOs: load them beside deploy/prometheus (operator only)."""
    response = app.http.get("/api/slos/rules")
    if not response.is_success:
        raise error_from_response(response)
    if output is None:
        click.echo(response.text, nl=False)
        return
    output.write_text(response.text)
    app.terminal.success(f"wrote {output}")
