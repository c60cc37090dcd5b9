"""A job's end, posted to its webhook: signed and retried by ``modelport.webhooks``.
The delivery is recorded in the transaction that ends the job (an outbox row), so a
crash right after that commit loses nothing: the deliverer finds the row and posts it.
Once per job and final state (the dedupe key)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

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

    def job_finished(self, session: Session, job: Job) -> None:
        if job.webhook is None:
            return
        state = job.state.value
        self.webhooks.enqueue_in(
            session,
            job.tenant,
            job.webhook,
            f"job.{state}",
            job_event(job),
            subject=job.id,
            dedupe_key=f"{job.id}:{state}",
        )

    def wake(self) -> None:
        self.webhooks.wake()
