"""``modelport jobs list``."""

from __future__ import annotations

import click

from modelport.cli.application import Application

STATES = ["queued", "running", "succeeded", "failed", "cancelled"]


@click.command("list")
@click.option("--state", type=click.Choice(STATES), default=None)
@click.option("--target", default=None, help="A model ref or endpoint name, as submitted.")
@click.option("--cursor", default=None, help="The next_cursor of a previous page.")
@click.option("--limit", type=click.IntRange(1, 100), default=50, show_default=True)
@click.pass_obj
def list_jobs(
    app: Application, state: str | None, target: str | None, cursor: str | None, limit: int
) -> None:
    """List your tenant's jobs, newest first."""
    page = app.client.jobs.list(state=state, target=target, cursor=cursor, limit=limit)
    if app.terminal.as_json:
        app.terminal.json(page.raw)
        return
    app.terminal.table(
        ["job", "state", "target", "stages done", "created"],
        [
            [
                job.id,
                job.state,
                next(iter(job.target.values()), ""),
                f"{job.stages_done}/{len(job.stages)}",
                job.raw.get("created_at"),
            ]
            for job in page.items
        ],
    )
    if page.next_cursor:
        app.terminal.info(f"more: --cursor {page.next_cursor}")
