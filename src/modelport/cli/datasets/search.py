"""``modelport datasets search``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("search")
@click.argument("query")
@click.option("--task", default=None, help="classification, regression, chat or embedding.")
@click.option("--license", "license_", default=None, help="An SPDX license, as published.")
@click.pass_obj
def search_datasets(app: Application, query: str, task: str | None, license_: str | None) -> None:
    """Search the datasets you can read by the words of their names, descriptions,
    task and license, best match first."""
    params = {"q": query, "kind": "dataset"}
    params.update({k: v for k, v in (("task", task), ("license", license_)) if v})
    body = app.check(app.http.get("/api/assets", params=params))
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    app.terminal.table(
        ["dataset", "latest", "task", "license", "description"],
        [
            [
                f"{d['owner']}/{d['name']}",
                (d.get("latest") or {}).get("version", ""),
                (d.get("latest") or {}).get("task", ""),
                (d.get("latest") or {}).get("license", ""),
                d["description"][:60],
            ]
            for d in body["items"]
        ],
    )
