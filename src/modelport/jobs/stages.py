"""Stages: the ``Stage`` contract, what a stage is given (``StageContext``), the
registry of implementations by name, and the built-ins ``validate``, ``infer`` and
``postprocess``.

A stage reads its input by digest from the blob store and answers its output as
bytes; the runner stores them by digest and records the stage done in the same
transaction that moves the job on. So a stage must be idempotent in its effects: run
again (its runner died before recording it), it must not do its work twice where that
shows (``infer``'s call is metered under an id derived from the job and the stage, so
the ledger and the balance see it once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import anyio.to_thread

from modelport.blobs.service import BlobService
from modelport.errors import InvalidInput
from modelport.inference.service import InferenceService
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    ModelTarget,
    Target,
)
from modelport.jobs import tensors
from modelport.jobs.jsonspans import JsonSpans, Span, open_object
from modelport.jobs.types import Job, Lease, StageSpec, StreamedOutput
from modelport.manifest import TensorSpec
from modelport.metering.meter import repeatable_id
from modelport.runtime.types import Priority
from modelport.sandbox.cancel import Cancellation
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal


@dataclass(frozen=True)
class StageServices:
    """What stages may use."""

    blobs: BlobService
    inference: InferenceService


@dataclass(frozen=True)
class StageContext:
    """One attempt of one stage of one job."""

    job: Job
    spec: StageSpec
    position: int
    attempt: int
    closed_attempts: int
    """Earlier attempts whose end was recorded: each spent its metered call's id, so this
    attempt's call takes a new one (``call_id``). An attempt that died with its runner
    is not closed: this one reuses its id and is charged once."""
    principal: Principal
    """The submitting principal: the job runs as it."""
    input_digest: str
    """The previous stage's output (the job's inputs for the first stage)."""
    outputs: Mapping[str, str]
    """The outputs of the stages done so far, by stage name."""
    services: StageServices
    lease: Lease | None = None
    """The runner's lease on the job: a stage's own writes for the job (a batch's shard
    checkpoints) carry it, and are refused (``LeaseLost``) once another runner took the
    job over. None outside a runner (nothing to fence)."""
    cancel: Cancellation = field(default_factory=Cancellation)
    """Cancelled when the job's cancel is requested during this attempt: a stage that
    can stop early watches it and raises ``Cancelled`` having recorded nothing (the job
    then ends ``cancelled``); one that does not runs on to the stage boundary."""

    async def read(self, digest: str) -> bytes:
        return await anyio.to_thread.run_sync(self.services.blobs.get, digest)

    async def read_input(self) -> dict[str, Any]:
        """The previous stage's output document, read and parsed on a worker thread."""
        blobs, digest = self.services.blobs, self.input_digest
        return await anyio.to_thread.run_sync(lambda: tensors.loads(blobs.get(digest)))


class Stage(Protocol):
    """A stage implementation. ``run`` is called once per attempt, on the runner's event
    loop, within the stage's timeout; it answers the stage's output (stored by digest:
    ``bytes``, or a ``StreamedOutput`` the runner writes piece by piece on a worker
    thread, for an output that may be big) or raises (a ``ModelportError`` of kind ``invalid``, ``not_found``, ``forbidden``,
    ``payment_required``, ``unprocessable`` or ``conflict`` fails the job at once; any
    other error is retried while the stage allows). It may be cancelled at any await
    (its timeout passed, or the runner stops); a job's cancel waits for it to end, unless
    it watches ``StageContext.cancel`` and raises ``Cancelled``."""

    async def run(self, context: StageContext) -> bytes | StreamedOutput: ...


def parse_target(kind: str, target: str) -> Target:
    """A job's stored target as the inference service's."""
    if kind == "endpoint":
        return EndpointTarget(target)
    ref, _, version = target.partition(":")
    owner, _, name = ref.partition("/")
    if not owner or not name:
        raise InvalidInput(
            f"target {target!r} is not owner/name[:version]", code="invalid_target", field="target"
        )
    return ModelTarget(owner, name, version or None)


async def declared(
    inference: InferenceService, principal: Principal, target: Target
) -> tuple[Sequence[TensorSpec], Sequence[TensorSpec]]:
    """The target's declared inputs and outputs, once the principal may call it (404 for
    a model or endpoint it may not see)."""
    if isinstance(target, EndpointTarget):
        route = await inference.route(Caller(principal), target.name, Permission.MODEL_CALL)
        return route.inputs, route.outputs
    await inference.require_model(principal, target.owner, target.name, Permission.MODEL_CALL)
    resolved = await inference.targets.target(target.owner, target.name, target.version)
    return resolved.manifest.inputs, resolved.manifest.outputs


class ValidateStage:
    """Decode the job's inputs against the target's declared tensors; its output is the
    request as the next stage reads it (inputs, parameters, outputs asked for)."""

    async def run(self, context: StageContext) -> bytes:
        doc = await context.read_input()
        job = context.job
        target = parse_target(job.target_kind, job.target)
        inputs, outputs = await declared(context.services.inference, context.principal, target)
        return await anyio.to_thread.run_sync(_validated, doc, inputs, outputs)


def _validated(
    doc: dict[str, Any], inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
) -> bytes:
    """The validate stage's output (CPU-bound: decoding every input)."""
    tensors.decode_inputs(doc.get("inputs"), inputs)
    asked = tensors.check_outputs(doc.get("outputs"), outputs)
    parameters = doc.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidInput("'parameters' must be an object", code="invalid_input")
    request: dict[str, Any] = {"inputs": doc["inputs"], "parameters": parameters}
    if asked is not None:
        request["outputs"] = list(asked)
    return tensors.dumps(request)


class InferStage:
    """Call the target through the inference service, as the submitting principal, at
    offline priority. The metered call's id is ``<job id>:<stage name>``, so a run again
    after a crash is charged once; the usage events carry the job id as their
    ``request_id``. Its reservation is drawn from the job's hold (``jobs.billing``)."""

    async def run(self, context: StageContext) -> StreamedOutput:
        doc = await context.read_input()
        job = context.job
        target = parse_target(job.target_kind, job.target)
        timeout = context.spec.timeout_seconds

        async def decode(
            inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
        ) -> InferenceRequest:
            arrays = await anyio.to_thread.run_sync(
                tensors.decode_inputs, doc.get("inputs"), inputs
            )
            return InferenceRequest(
                inputs=arrays,
                parameters=dict(doc.get("parameters") or {}),
                outputs=tensors.check_outputs(doc.get("outputs"), outputs),
                timeout=timeout,
                priority=Priority.OFFLINE,
            )

        caller = Caller(
            context.principal,
            request_id=job.id,
            call_id=call_id(job.id, context),
            hold_id=hold_id(job.id),
        )
        result = await context.services.inference.infer(caller, target, decode)
        assert isinstance(result, InferenceResult)  # no idempotency key: never a replay
        document = {
            "model": result.model,
            "version": result.version,
            "prediction_id": result.prediction_id,
            "outputs": [tensors.streamed_tensor(n, a) for n, a in result.outputs.items()],
        }
        # Encoded while it is written, a slice of each array at a time: the arrays are
        # all that is held, never their JSON.
        return StreamedOutput(partial(tensors.dump_chunks, document))


def hold_id(job_id: str) -> str:
    """The reservation id of the job's upfront hold (``jobs.billing``): the same for
    every runner that runs the job."""
    return repeatable_id(f"job:{job_id}:hold")


def call_id(job_id: str, context: StageContext) -> str:
    """The metered call id of a job's stage attempt: ``job:<job id>:<stage>`` for the
    first, and the same for every run after a runner died in it; ``:<n>`` added after
    ``n`` recorded ends (failures, timeouts, interruptions), whose calls were settled."""
    base = f"job:{job_id}:{context.spec.name}"
    return base if context.closed_attempts == 0 else f"{base}:{context.closed_attempts}"


class PostprocessStage:
    """Select and rename outputs: ``params.select`` (names to keep, in order; default
    all), ``params.rename`` (old name → new name). The previous output is read by spans
    (``jobs.jsonspans``) on a worker thread: a tensor's data is copied as it is, never
    parsed, and the result is written as it is made."""

    async def run(self, context: StageContext) -> StreamedOutput:
        params = context.spec.params
        select = params.get("select")
        rename = params.get("rename") or {}
        if select is not None and not (
            isinstance(select, list) and all(isinstance(name, str) for name in select)
        ):
            raise InvalidInput("'select' must be a list of output names", code="invalid_params")
        if not isinstance(rename, dict) or not all(isinstance(new, str) for new in rename.values()):
            raise InvalidInput("'rename' must map output names to names", code="invalid_params")
        blobs, digest = context.services.blobs, context.input_digest
        return await anyio.to_thread.run_sync(_selected, blobs, digest, select, rename)


_PARSED_BYTES = 1 << 16
"""A value of the previous output up to this size is parsed; a bigger one is copied."""


def _selected(
    blobs: BlobService, digest: str, select: list[str] | None, rename: Mapping[str, str]
) -> StreamedOutput:
    """The postprocess stage's output, checked now and written later (see the class)."""
    doc, top = open_object(blobs, digest)
    outputs: dict[str, dict[str, Span]] = {}
    if "outputs" in top:
        for item in doc.array(top["outputs"]):
            fields = doc.object(item)
            name = doc.load(fields["name"]) if "name" in fields else None
            if not isinstance(name, str):
                raise InvalidInput("an output without a name", code="invalid_job_input")
            outputs[name] = fields
    names = list(outputs) if select is None else list(select)
    kept: list[dict[str, Any]] = []
    for name in names:
        if name not in outputs:
            raise InvalidInput(
                f"output '{name}' was not produced; there are {sorted(outputs)}",
                code="unknown_output",
            )
        kept.append({**_values(doc, outputs[name]), "name": rename.get(name, name)})
    document = {**_values(doc, {k: v for k, v in top.items() if k != "outputs"}), "outputs": kept}
    return StreamedOutput(partial(tensors.dump_chunks, document))


def _values(doc: JsonSpans, fields: Mapping[str, Span]) -> dict[str, Any]:
    """Small values parsed (checked now), big ones to be copied when written."""
    return {
        key: doc.load(span)
        if span.size <= _PARSED_BYTES
        else tensors.Verbatim(partial(doc.stream, span))
        for key, span in fields.items()
    }


class StageRegistry:
    """Stage implementations by name (``StageSpec.implementation``)."""

    def __init__(self, stages: Mapping[str, Stage] | None = None) -> None:
        self._stages: dict[str, Stage] = dict(stages or {})

    @classmethod
    def builtin(cls) -> StageRegistry:
        return cls(
            {"validate": ValidateStage(), "infer": InferStage(), "postprocess": PostprocessStage()}
        )

    def register(self, name: str, stage: Stage) -> None:
        self._stages[name] = stage

    def get(self, name: str) -> Stage | None:
        return self._stages.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._stages

    def names(self) -> list[str]:
        return sorted(self._stages)
