"""How a validation report is printed (``versions show``, ``versions validation``)."""

from __future__ import annotations

from modelport.cli.application import Application
from modelport.client.errors import NotFound
from modelport.client.types import ValidationReport, report_problems


def latest_report(app: Application, ref: str) -> ValidationReport | None:
    """The version's latest report; None before any validation."""
    try:
        return app.client.versions.validation(ref)
    except NotFound as exc:
        if exc.code == "validation_not_found":
            return None
        raise


def print_report(app: Application, report: ValidationReport | None) -> None:
    t = app.terminal
    if report is None:
        t.info("validation: not run yet (modelport versions transition REF --to validated)")
        return
    body = report.report
    verdict = "[green]passed[/green]" if report.passed else "[red]failed[/red]"
    cause = f" ({body['cause']})" if body.get("cause") else ""
    t.info(f"validation: {verdict}{cause} at {report.created_at}")
    if body.get("detail"):
        t.info(f"  {body['detail']}")
    for problem in report_problems(body):
        t.info(f"  - {problem}")
