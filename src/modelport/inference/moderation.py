"""Moderation of synchronous calls, for ``InferenceService`` (see ``docs/moderation.md``).

Where the caller's tenant has a policy that applies to synchronous calls (``sync``):

- a tensor call's BYTES inputs are moderated once decoded, before anything is reserved:
  blocked, the call ends with 400 ``content_blocked`` and costs nothing;
- its BYTES outputs once the call is settled: blocked, the answer is withheld
  (``content_blocked``) but the call is billed as answered (the model ran);
- a generative call's prompt (or chat) once admitted, before anything is reserved (as a
  tensor call's inputs: the pipeline's moderate step); its output, chunk by
  chunk: each choice's text so far is moderated before the chunk is released, and a
  blocked one ends the stream (``content_blocked``; billed for what was produced).

A tenant without such a policy costs one dict lookup per call (``policy_for``).
``classifier_of`` is the seam a ``ModelModerator`` runs a classifier model through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from modelport.errors import InvalidInput
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import Caller, InferenceRequest, ModelTarget
from modelport.manifest import TensorSpec
from modelport.moderation.interface import Classify
from modelport.moderation.service import ModerationService, blocked
from modelport.moderation.types import ALLOWED, DecisionRecord, Disposition, Policy, Stage, Subject
from modelport.serving.types import StreamChunk
from modelport.tenancy.types import Principal

if TYPE_CHECKING:
    from modelport.inference.service import InferenceService

_log = logging.getLogger(__name__)

_pending: set[asyncio.Future[DecisionRecord]] = set()
"""Records of allowed stream outputs being written (the loop keeps weak references)."""


def texts_of(tensors: Mapping[str, np.ndarray]) -> list[str]:
    """Every text element of the BYTES tensors (UTF-8, undecodable bytes replaced)."""
    texts: list[str] = []
    for array in tensors.values():
        if array.dtype != np.object_:
            continue
        for item in array.reshape(-1).tolist():
            if isinstance(item, bytes):
                texts.append(item.decode("utf-8", "replace"))
            elif isinstance(item, str):
                texts.append(item)
    return texts


def prompt_texts(request: GenerateRequest) -> list[str]:
    """A generative request's texts: its prompt, or its chat's contents."""
    if request.messages is None:
        return [request.prompt]
    return [message.content for message in request.messages]


class SyncModeration:
    """The inference service's moderation steps (see the module docstring)."""

    def __init__(self, service: ModerationService) -> None:
        self.service = service

    async def policy(self, caller: Caller) -> Policy | None:
        """The caller's tenant's policy when it applies to synchronous calls."""
        tenant = caller.principal.tenant
        if tenant is None:
            return None  # the operator's admin key: no tenant, no policy
        policy = await self.service.policy_for(tenant)
        return policy if policy is not None and policy.sync else None

    async def check(
        self,
        policy: Policy,
        caller: Caller,
        stage: Stage,
        texts: Sequence[str],
        model: str,
        version: str,
    ) -> None:
        """Moderate and record ``texts``; raises ``content_blocked``."""
        if not texts:
            return
        subject = Subject(policy.tenant, stage, model, version, caller.request_id)
        await self.service.check(texts, policy, subject)

    def stream_check(
        self, policy: Policy, caller: Caller, model: str, version: str
    ) -> StreamOutputCheck:
        return StreamOutputCheck(
            self.service,
            policy,
            Subject(policy.tenant, Stage.OUTPUT, model, version, caller.request_id),
        )


class StreamOutputCheck:
    """A stream's output moderation: each choice's text so far, before each chunk goes
    out. The first flagged or the blocking verdict is recorded when it is made; an
    output allowed whole is recorded once, when the stream ends."""

    def __init__(self, service: ModerationService, policy: Policy, subject: Subject) -> None:
        self.service = service
        self.policy = policy
        self.subject = subject
        self._texts: dict[int, str] = {}
        self._recorded = False

    async def __call__(self, chunk: StreamChunk) -> None:
        if not chunk.text:
            return
        text = self._texts.get(chunk.choice, "") + chunk.text
        self._texts[chunk.choice] = text
        decision = await self.service.moderate([text], self.policy)
        if decision.disposition is Disposition.ALLOWED:
            return
        if not self._recorded or decision.disposition is Disposition.BLOCKED:
            self._recorded = True
            await asyncio.to_thread(self.service.record, self.subject, self.policy, decision)
        if decision.disposition is Disposition.BLOCKED:
            raise blocked(decision, self.subject)

    def ended(self) -> None:
        """The stream ended: record an output that was allowed whole. Never blocks."""
        if self._recorded or not self._texts:
            return
        self._recorded = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        future = loop.run_in_executor(None, self.service.record, self.subject, self.policy, ALLOWED)
        _pending.add(future)
        future.add_done_callback(_recorded)


def _recorded(future: asyncio.Future[DecisionRecord]) -> None:
    _pending.discard(future)
    if not future.cancelled() and future.exception() is not None:
        _log.error("recording a moderation decision failed", exc_info=future.exception())


def classifier_of(inference: Callable[[], InferenceService]) -> Classify:
    """A classifier model called through ``inference()`` on behalf of the policy's tenant
    (its access rules apply; the call is metered to the tenant, and not moderated
    itself). The model takes the texts in its first BYTES input and answers one score
    per text in each floating-point output, named by its category."""

    async def classify(tenant: str, model: str, texts: Sequence[str]) -> Mapping[str, list[float]]:
        ref, _, version = model.partition(":")
        owner, _, name = ref.partition("/")
        principal = Principal(
            id=f"moderation:{tenant}", roles=frozenset({"consumer"}), tenant=tenant
        )
        caller = Caller(principal)

        async def decode(
            inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
        ) -> InferenceRequest:
            spec = next((s for s in inputs if s.datatype == "BYTES"), None)
            if spec is None:
                raise InvalidInput(
                    f"classifier {model} takes no BYTES input", code="invalid_classifier"
                )
            array = np.array([t.encode("utf-8") for t in texts], dtype=np.object_)
            if len(spec.shape) == 2:
                array = array.reshape(-1, 1)
            return InferenceRequest({spec.name: array})

        target = ModelTarget(owner, name, version or None)
        result = await inference().call_model(caller, target, decode, moderate=False)
        return {
            name: [float(v) for v in array.reshape(len(texts), -1).max(axis=1)]
            for name, array in result.outputs.items()
            if array.dtype.kind == "f" and texts and array.size % len(texts) == 0
        }

    return classify
