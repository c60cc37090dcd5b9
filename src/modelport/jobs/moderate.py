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

import anyio.to_thread

from modelport.blobs.service import BlobService
from modelport.errors import InvalidInput
from modelport.jobs.jsonspans import Span, open_object
from modelport.jobs.stages import StageContext
from modelport.jobs.types import StreamedOutput
from modelport.moderation.service import ModerationService
from modelport.moderation.types import Stage, Subject


def _flatten(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, list):
        return [text for element in data for text in _flatten(element)]
    return []


class ModerateStage:
    """See the module docstring. The stage's input is read by spans on a worker thread
    (``jobs.jsonspans``): only BYTES tensors' data is parsed, and the input is passed on
    as a streamed copy, never held whole."""

    def __init__(self, moderation: ModerationService) -> None:
        self.moderation = moderation

    async def run(self, context: StageContext) -> StreamedOutput:
        side = context.spec.params.get("on", "input")
        if side not in ("input", "output"):
            raise InvalidInput("'on' must be 'input' or 'output'", code="invalid_params")
        blobs, digest = context.services.blobs, context.input_digest
        job = context.job
        policy = await self.moderation.policy_for(job.tenant)
        if policy is not None:
            key = "inputs" if side == "input" else "outputs"
            texts, model, version = await anyio.to_thread.run_sync(_texts, blobs, digest, key)
            if texts:
                subject = Subject(
                    job.tenant,
                    Stage(side),
                    model=str(model or job.target),
                    version=str(version or ""),
                    request_id=job.id,
                    job_id=job.id,
                )
                await self.moderation.check(texts, policy, subject)
        return StreamedOutput(lambda: blobs.read(blobs.stat(digest)))


def _texts(blobs: BlobService, digest: str, key: str) -> tuple[list[str], Any, Any]:
    """The texts of the BYTES tensors listed under ``key``, and the document's model
    and version (blocking)."""
    doc, top = open_object(blobs, digest)
    texts: list[str] = []
    items: list[Span] = []
    if key in top:
        try:
            items = doc.array(top[key])
        except InvalidInput:  # not a list: no tensors, no texts
            items = []
    for item in items:
        try:
            fields = doc.object(item)
        except InvalidInput:  # not a tensor
            continue
        if "datatype" in fields and doc.load(fields["datatype"]) == "BYTES" and "data" in fields:
            texts.extend(_flatten(doc.load(fields["data"])))
    model = doc.load(top["model"]) if "model" in top else None
    version = doc.load(top["version"]) if "version" in top else None
    return texts, model, version
