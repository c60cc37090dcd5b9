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
from dataclasses import dataclass
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
from modelport.jobs.types import Job, StageSpec
from modelport.manifest import TensorSpec
from modelport.metering.meter import repeatable_id
from modelport.runtime.types import Priority
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

    async def read(self, digest: str) -> bytes:
        return await anyio.to_thread.run_sync(self.services.blobs.get, digest)

    async def read_input(self) -> dict[str, Any]:
        return tensors.loads(await self.read(self.input_digest))


class Stage(Protocol):
    """A stage implementation. ``run`` is called once per attempt, on the runner's event
    loop, within the stage's timeout; it answers the stage's output (stored by digest)
    or raises (a ``ModelportError`` of kind ``invalid``, ``not_found``, ``forbidden``,
    ``payment_required``, ``unprocessable`` or ``conflict`` fails the job at once; any
    other error is retried while the stage allows). It may be cancelled at any await
    (its timeout passed, or the runner stops); a job's cancel waits for it to end."""

    async def run(self, context: StageContext) -> bytes: ...


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

    async def run(self, context: StageContext) -> bytes:
        doc = await context.read_input()
        job = context.job
        target = parse_target(job.target_kind, job.target)
        timeout = context.spec.timeout_seconds

        async def decode(
            inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
        ) -> InferenceRequest:
            return InferenceRequest(
                inputs=tensors.decode_inputs(doc.get("inputs"), inputs),
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
        return tensors.dumps(
            {
                "model": result.model,
                "version": result.version,
                "prediction_id": result.prediction_id,
                "outputs": [tensors.encode_tensor(n, a) for n, a in result.outputs.items()],
            }
        )


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
    all), ``params.rename`` (old name → new name)."""

    async def run(self, context: StageContext) -> bytes:
        doc = await context.read_input()
        params = context.spec.params
        outputs = {item["name"]: item for item in doc.get("outputs", [])}
        select = params.get("select")
        rename = params.get("rename") or {}
        if select is not None and not (
            isinstance(select, list) and all(isinstance(name, str) for name in select)
        ):
            raise InvalidInput("'select' must be a list of output names", code="invalid_params")
        if not isinstance(rename, dict) or not all(isinstance(new, str) for new in rename.values()):
            raise InvalidInput("'rename' must map output names to names", code="invalid_params")
        names = list(outputs) if select is None else list(select)
        kept = []
        for name in names:
            if name not in outputs:
                raise InvalidInput(
                    f"output '{name}' was not produced; there are {sorted(outputs)}",
                    code="unknown_output",
                )
            kept.append({**outputs[name], "name": rename.get(name, name)})
        return tensors.dumps({**{k: v for k, v in doc.items() if k != "outputs"}, "outputs": kept})


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
