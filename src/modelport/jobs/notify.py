"""A job's end, posted to its webhook: signed and retried by ``modelport.webhooks``,
once per job and final state (the dedupe key), so a runner that resumes a job after a
crash and reports its end again sends nothing more."""

from __future__ import annotations

from typing import Any

from modelport.jobs.types import Job
from modelport.webhooks.service import WebhookService


def job_event(job: Job) -> dict[str, Any]:
    """The ``data`` of a job's webhook event."""
    error = None
    if job.error_code is not None:
        error = {"code": job.error_code, "message": job.error_message}
    return {
        "id": job.id,
        "state": job.state.value,
        "target": {"kind": job.target_kind, "name": job.target},
        "created_at": job.created_at.isoformat(),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "output_digest": job.output_digest,
        "error": error,
    }


class WebhookNotifier:
    """The ``JobNotifier`` of a serving process: ``job.succeeded``, ``job.failed`` or
    ``job.cancelled`` to the job's webhook, if it has one."""

    def __init__(self, webhooks: WebhookService) -> None:
        self.webhooks = webhooks

    def check_webhook(self, url: str) -> None:
        self.webhooks.check_url(url)

    def job_finished(self, job: Job) -> None:
        if job.webhook is None:
            return
        state = job.state.value
        self.webhooks.enqueue(
            job.tenant,
            job.webhook,
            f"job.{state}",
            job_event(job),
            subject=job.id,
            dedupe_key=f"{job.id}:{state}",
        )
