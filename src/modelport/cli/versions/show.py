"""``modelport versions show owner/name:V``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import version_path
from modelport.cli.versions.report import latest_report, print_report


@click.command()
@click.argument("ref")
@click.pass_obj
def show(app: Application, ref: str) -> None:
    """Show a version (owner/name:V): state, files, signatures, the validation report."""
    body = app.check(app.http.get(version_path(app, ref)))
    report = latest_report(app, ref)
    body["validation"] = None if report is None else report.raw
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    t = app.terminal
    manifest = body["manifest"]
    t.info(f"[bold]{body['model']}:{body['version']}[/bold]  state: {body['state']}")
    t.info(f"digest: {body['manifest_digest']}")
    t.info(f"format: {body['format']}   license: {body['license']}")
    t.info(f"created: {body['created_at']} by {body['created_by']}")
    if manifest.get("description"):
        t.info(f"description: {manifest['description']}")
    t.table(
        ["path", "digest", "size"],
        [[f["path"], f["digest"], f["size"]] for f in manifest["files"]],
        title="files",
    )
    for s in body["signatures"]:
        mark = "[green]verified[/green]" if s["verified"] else "[red]NOT VERIFIED[/red]"
        t.info(f"signature by {s['signer']} ({s['key_id'][:19]}…): {mark}")
    print_report(app, report)
