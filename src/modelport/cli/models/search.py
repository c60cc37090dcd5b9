"""``modelport models search``: the catalog's ranked search, with its facets."""

from __future__ import annotations

from typing import Any

import click

from modelport.cli.application import Application


@click.command("search")
@click.argument("query")
@click.option("--task", default=None)
@click.option("--format", "format_", default=None, help="Models with a version of this format.")
@click.option("--license", "license_", default=None, help="SPDX license of the model.")
@click.option("--price", default=None, help="Price band: free, low, medium or high.")
@click.option("--owner", default=None)
@click.option("--tag", default=None)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200))
@click.option("--cursor", default=None, help="next_cursor of a previous page.")
@click.pass_obj
def search(
    app: Application,
    query: str,
    task: str | None,
    format_: str | None,
    license_: str | None,
    price: str | None,
    owner: str | None,
    tag: str | None,
    limit: int,
    cursor: str | None,
) -> None:
    """Find models by words in their names, tags, tasks, descriptions and cards, best
    match first (an exact name leads)."""
    params: dict[str, Any] = {
        "q": query,
        "task": task,
        "format": format_,
        "license": license_,
        "price": price,
        "owner": owner,
        "tag": tag,
        "limit": limit,
        "cursor": cursor,
    }
    page = app.check(
        app.http.get("/api/models", params={k: v for k, v in params.items() if v is not None})
    )
    if app.terminal.as_json:
        app.terminal.json(page)
        return
    rows = [[m["model"], m["task"], m["license"], ", ".join(m["tags"])] for m in page["items"]]
    app.terminal.table(["model", "task", "license", "tags"], rows, title=f"{page['total']} found")
    for name, counts in (page.get("facets") or {}).items():
        if counts:
            app.terminal.info(
                f"{name}: " + ", ".join(f"{c['value']} ({c['count']})" for c in counts)
            )
    if page.get("suggestions"):
        app.terminal.info("did you mean: " + ", ".join(page["suggestions"]))
    if page["next_cursor"]:
        app.terminal.info(f"more: --cursor {page['next_cursor']}")
