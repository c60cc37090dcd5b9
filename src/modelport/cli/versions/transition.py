"""``modelport versions transition owner/name:V --to STATE --reason TEXT``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import version_path
from modelport.client.versions import POLL_SECONDS, VALIDATION_WAIT, ended_transition
from modelport.registry.types import LifecycleState


@click.command()
@click.argument("ref")
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Choice([s.value for s in LifecycleState]),
    help="Target state; 'validated' runs the validation.",
)
@click.option("--reason", default="", help="Why (recorded in the version's history).")
@click.pass_obj
def transition(app: Application, ref: str, to: str, reason: str) -> None:
    """Move a version (owner/name:V) to another lifecycle state. A validation the
    server runs on as a job (it answered 202) is followed until it ends."""
    body = app.check(
        app.http.post(
            f"{version_path(app, ref)}/transitions",
            json={"to": to, "reason": reason},
            timeout=VALIDATION_WAIT,  # validation loads and runs the model first
        )
    )
    if "event" not in body:  # 202: the validation's job, queued or running
        job_id = str(body["id"])
        if not app.terminal.as_json:
            app.terminal.info(f"{ref}: validating as job {job_id} ({body['state']})")
        job = app.client.jobs.wait(job_id, timeout=VALIDATION_WAIT, interval=POLL_SECONDS)
        failed = (job.error or {}).get("code") == "validation_failed"
        report = app.client.versions.validation(ref) if failed else None
        body = ended_transition(job, report).raw
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    event = body["event"]
    app.terminal.success(f"{ref}: {event['from']} -> {event['to']}")
