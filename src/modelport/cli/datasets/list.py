"""``modelport datasets list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.option("--owner", default=None, help="Only this namespace's datasets.")
@click.option("--task", default=None, help="classification, regression, chat or embedding.")
@click.pass_obj
def list_datasets(app: Application, owner: str | None, task: str | None) -> None:
    """List the datasets you can see, with their latest version."""
    params = {k: v for k, v in (("owner", owner), ("task", task)) if v}
    body = app.check(app.http.get("/api/datasets", params=params))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["dataset", "visibility", "latest", "task", "license"],
        [
            [
                f"{d['owner']}/{d['name']}",
                d["visibility"],
                (d.get("latest") or {}).get("version", ""),
                (d.get("latest") or {}).get("task", ""),
                (d.get("latest") or {}).get("license", ""),
            ]
            for d in body["items"]
        ],
    )
