"""``modelport jobs watch ID``: a progress bar of the job's stages (a batch's rows)
until it ends."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.jobs.output import print_job
from modelport.client.types import Job


@click.command()
@click.argument("job_id")
@click.option(
    "--interval", type=float, default=0.5, show_default=True, help="Seconds between polls."
)
@click.option("--timeout", type=float, default=3600.0, show_default=True)
@click.pass_obj
def watch(app: Application, job_id: str, interval: float, timeout: float) -> None:
    """Follow job JOB_ID until it ends; exit 1 unless it succeeded."""
    with app.terminal.steps() as progress:
        task = progress.add_task(f"job {job_id}", total=None)

        def show(job: Job) -> None:
            running = next((s["name"] for s in job.stages if s["state"] == "running"), None)
            label = job.state if running is None else f"{job.state}: {running}"
            rows = job.progress
            if rows is not None and rows.get("rows_total"):
                # A batch: the bar counts rows, not stages.
                failed = rows.get("rows_failed") or 0
                eta = rows.get("estimated_completion")
                label += f", {failed} failed" if failed else ""
                label += f", done by {eta}" if eta else ""
                progress.update(
                    task,
                    total=rows["rows_total"],
                    completed=rows.get("rows_done") or 0,
                    description=f"job {job_id} {label}",
                )
                return
            progress.update(
                task,
                total=len(job.stages),
                completed=job.stages_done,
                description=f"job {job_id} {label}",
            )

        try:
            job = app.client.jobs.wait(job_id, timeout=timeout, interval=interval, progress=show)
        except TimeoutError as exc:
            app.terminal.abort(str(exc))
    if app.terminal.as_json:
        app.terminal.json(job.raw)
    else:
        print_job(app, job)
    if job.state != "succeeded":
        raise SystemExit(1)
