"""The ``moderate`` stage: the texts of a job's inputs (``params.on: "input"``, before
``infer``) or of its outputs (``"output"``, after it) checked under the tenant's
moderation policy, whether or not that policy covers synchronous calls. A blocked text
fails the job at once (``content_blocked``, never retried) with its decision audited;
the stage's output is its input, unchanged.

A tenant with an active policy gets both stages in its default pipeline
(``JobService``); one without passes through them untouched. A stage run again after
its runner died audits its decision again: the audit is of each check made."""

from __future__ import annotations

from typing import Any

from modelport.errors import InvalidInput
from modelport.jobs import tensors
from modelport.jobs.stages import StageContext
from modelport.moderation.service import ModerationService
from modelport.moderation.types import Stage, Subject


def texts_of(items: Any) -> list[str]:
    """The strings of the BYTES tensors among ``items`` (JSON tensors)."""
    texts: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("datatype") == "BYTES":
            texts.extend(_flatten(item.get("data")))
    return texts


def _flatten(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, list):
        return [text for element in data for text in _flatten(element)]
    return []


class ModerateStage:
    """See the module docstring."""

    def __init__(self, moderation: ModerationService) -> None:
        self.moderation = moderation

    async def run(self, context: StageContext) -> bytes:
        side = context.spec.params.get("on", "input")
        if side not in ("input", "output"):
            raise InvalidInput("'on' must be 'input' or 'output'", code="invalid_params")
        raw = await context.read(context.input_digest)
        job = context.job
        policy = await self.moderation.policy_for(job.tenant)
        if policy is None:
            return raw
        doc = tensors.loads(raw)
        texts = texts_of(doc.get("inputs" if side == "input" else "outputs"))
        if texts:
            subject = Subject(
                job.tenant,
                Stage(side),
                model=str(doc.get("model") or job.target),
                version=str(doc.get("version") or ""),
                request_id=job.id,
                job_id=job.id,
            )
            await self.moderation.check(texts, policy, subject)
        return raw
