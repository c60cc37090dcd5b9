"""``modelport versions validation owner/name:V``: the latest validation report."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import version_path
from modelport.cli.versions.report import latest_report, print_report


@click.command()
@click.argument("ref")
@click.pass_obj
def validation(app: Application, ref: str) -> None:
    """Show the latest validation report of a version (owner/name:V): whether it passed,
    and each problem found (files, examples)."""
    version_path(app, ref)  # a malformed ref is refused before any request
    report = latest_report(app, ref)
    if app.terminal.as_json:
        app.terminal.json(None if report is None else report.raw)
        return
    print_report(app, report)
