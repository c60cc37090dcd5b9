"""``modelport formats``: what the platform runs, and the operator's format decisions."""

from __future__ import annotations

from urllib.parse import quote

import click

from modelport.cli.application import Application


@click.group()
def formats() -> None:
    """Model formats: those the platform runs, and those accepted for approval."""


@formats.command("list")
@click.pass_obj
def list_formats(app: Application) -> None:
    """The formats the platform runs, and those a platform admin accepted."""
    body = app.check(app.http.get("/api/formats"))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.info("runs: " + ", ".join(body["runnable"]))
    app.terminal.table(
        ["accepted", "reason", "decided_by", "decided_at"],
        [[d["format"], d["reason"], d["decided_by"], d["decided_at"]] for d in body["accepted"]],
    )


@formats.command("accept")
@click.argument("fmt", metavar="FORMAT")
@click.option("--reason", required=True, help="Why its versions may be approved (audited)")
@click.pass_obj
def accept(app: Application, fmt: str, reason: str) -> None:
    """Let versions of FORMAT, which the platform does not run, be approved."""
    path = f"/api/formats/{quote(fmt, safe='')}"
    body = app.check(app.http.put(path, json={"reason": reason}))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.success(f"{fmt}: accepted by {body['decided_by']}")


@formats.command("withdraw")
@click.argument("fmt", metavar="FORMAT")
@click.pass_obj
def withdraw(app: Application, fmt: str) -> None:
    """Withdraw the decision on FORMAT: further approvals of it are refused."""
    app.check(app.http.delete(f"/api/formats/{quote(fmt, safe='')}"))
    app.terminal.success(f"{fmt}: decision withdrawn")
