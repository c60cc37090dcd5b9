"""``modelport jobs show ID``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.jobs.output import print_job


@click.command()
@click.argument("job_id")
@click.pass_obj
def show(app: Application, job_id: str) -> None:
    """Show job JOB_ID: its state, stages and (once done) outputs."""
    job = app.client.jobs.get(job_id)
    if app.terminal.as_json:
        app.terminal.json(job.raw)
        return
    print_job(app, job)
