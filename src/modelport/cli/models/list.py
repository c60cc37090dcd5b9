"""``modelport models list``: the catalog, filtered."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command("list")
@click.option("--q", "q", default=None, help="Words to search for (ranked; see `models search`).")
@click.option("--task", default=None)
@click.option("--owner", default=None)
@click.option("--format", "format_", default=None, help="Models with a version of this format.")
@click.option("--tag", default=None)
@click.option("--license", "license_", default=None, help="SPDX license of the model.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 200))
@click.option("--cursor", default=None, help="next_cursor of a previous page.")
@click.pass_obj
def list_models(
    app: Application,
    q: str | None,
    task: str | None,
    owner: str | None,
    format_: str | None,
    tag: str | None,
    license_: str | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List models matching every given filter."""
    params = {
        "q": q,
        "task": task,
        "owner": owner,
        "format": format_,
        "tag": tag,
        "license": license_,
        "limit": limit,
        "cursor": cursor,
    }
    page = app.check(
        app.http.get("/api/models", params={k: v for k, v in params.items() if v is not None})
    )
    if app.terminal.as_json:
        app.terminal.json(page)
        return
    rows = [
        [m["model"], m["task"], m["license"], ", ".join(m["tags"]), m["visibility"]]
        for m in page["items"]
    ]
    app.terminal.table(["model", "task", "license", "tags", "visibility"], rows)
    if page["next_cursor"]:
        app.terminal.info(f"more: --cursor {page['next_cursor']}")
