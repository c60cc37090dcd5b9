"""``modelport jobs cancel ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.argument("job_id")
@click.pass_obj
def cancel(app: Application, job_id: str) -> None:
    """Cancel job JOB_ID: it stops at its next stage boundary."""
    job = app.client.jobs.cancel(job_id)
    if app.terminal.as_json:
        app.terminal.json(job.raw)
        return
    if job.state == "cancelled":
        app.terminal.success(f"job {job.id} cancelled")
    else:
        app.terminal.info(f"job {job.id}: cancel requested; it stops at its next stage")
