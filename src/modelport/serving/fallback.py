"""The fallback chain: what an endpoint answers when its primary version cannot.

Configuration (``FallbackChain`` in ``serving.types``, stored on the endpoint) is
turned once into runtime ``FallbackOption``s by ``build_fallback``, which refuses
(``Unprocessable``, code ``incompatible_fallback``) a version or a static answer
whose schema differs from the primary's. The steps, in the configured order:

- ``VersionOption``: run another version on its own replicas (through the same
  replica loop: breakers, retries). Checked again at execution, so a version whose
  inputs, outputs or declared labels differ is skipped, never used silently.
- ``CacheOption``: a recent answer to the same inputs, if one is fresh.
- ``StaticOption``: fixed outputs (repeated per row for a batched request).
- ``UnavailableOption``: stop with an explicit ``unavailable`` error.

``run_chain`` walks them for every kind of call (``serving.call_mode``); a cached or
static answer is a whole tensor answer, so a stream passes over those two steps.
When every step passes, the primary's own error is raised. Every answer says in
its ``Provenance`` which step gave it and the error code that caused it, and each
is counted in ``modelport_serving_fallbacks_total{endpoint,kind}``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelport.clock import Clock, SystemClock
from modelport.errors import InvalidInput, ModelportError, Unavailable, Unprocessable
from modelport.manifest import ExampleTensor, Manifest, TensorSpec
from modelport.observability.serving_metrics import ServingMetrics
from modelport.runtime.tensors import decode_json_tensor
from modelport.serving.answer_cache import AnswerCache, AnswerCaches, input_key
from modelport.serving.backends.base import Backend
from modelport.serving.call_mode import CallMode, OutT, ReqT, WonT
from modelport.serving.types import (
    Attempt,
    BackendRequest,
    CacheFallback,
    FallbackChain,
    FallbackKind,
    Provenance,
    Served,
    StaticFallback,
    UnavailableFallback,
    VersionFallback,
    VersionRef,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VersionOption:
    version: VersionRef
    replicas: tuple[Backend, ...]


@dataclass(frozen=True)
class CacheOption:
    cache: AnswerCache


@dataclass(frozen=True)
class StaticOption:
    outputs: Mapping[str, np.ndarray]


@dataclass(frozen=True)
class UnavailableOption:
    message: str


FallbackOption = VersionOption | CacheOption | StaticOption | UnavailableOption
RunVersion = Callable[[ReqT, Sequence[Backend], list[Attempt]], Awaitable[WonT]]
"""The replica loop on one version: the call accepted, or the last failure raised."""


# ---- schema compatibility (pure)
def _labels(manifest: Manifest) -> Any:
    return manifest.postprocessing.labels if manifest.postprocessing is not None else None


def _shapes_agree(a: list[int], b: list[int]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))


def _tensor_problems(kind: str, wanted: list[TensorSpec], offered: list[TensorSpec]) -> list[str]:
    by_name = {t.name: t for t in offered}
    problems = []
    for spec in wanted:
        other = by_name.get(spec.name)
        if other is None:
            problems.append(f"{kind} '{spec.name}' is missing")
        elif other.datatype != spec.datatype:
            problems.append(f"{kind} '{spec.name}' is {other.datatype}, not {spec.datatype}")
        elif not _shapes_agree(spec.shape, other.shape):
            problems.append(f"{kind} '{spec.name}' has shape {other.shape}, not {spec.shape}")
    return problems


def schema_problems(primary: Manifest, other: Manifest) -> list[str]:
    """Why ``other`` cannot stand in for ``primary`` (empty: it can).

    It must take the primary's inputs (and need no others) and produce each of the
    primary's outputs with the same name, datatype and shape, and declare the same
    class labels where the primary declares labels.
    """
    problems = _tensor_problems("input", primary.inputs, other.inputs)
    extra = {t.name for t in other.inputs} - {t.name for t in primary.inputs}
    problems += [f"input '{name}' is not one of the primary's" for name in sorted(extra)]
    problems += _tensor_problems("output", primary.outputs, other.outputs)
    if _labels(primary) is not None and _labels(primary) != _labels(other):
        problems.append("its output labels differ from the primary's")
    return problems


def static_outputs(primary: Manifest, tensors: Sequence[ExampleTensor]) -> dict[str, np.ndarray]:
    """Decode a static answer, checked against the primary's outputs."""
    declared = [TensorSpec(name=t.name, datatype=t.datatype, shape=t.shape) for t in tensors]
    problems = _tensor_problems("output", primary.outputs, declared)
    if problems:
        raise Unprocessable(
            "static fallback does not match the primary's outputs: " + "; ".join(problems),
            code="incompatible_fallback",
            problems=problems,
        )
    try:
        return {
            t.name: decode_json_tensor(t.name, t.datatype, t.shape, t.data, role="output")
            for t in tensors
        }
    except InvalidInput as exc:
        raise Unprocessable(
            f"static fallback: {exc.message}", code="incompatible_fallback"
        ) from None


def build_fallback(
    chain: FallbackChain,
    primary: VersionRef,
    *,
    endpoint: str,
    resolve: Callable[[str, str], VersionRef],
    replicas_for: Callable[[VersionRef], Sequence[Backend]],
    caches: AnswerCaches,
) -> list[FallbackOption]:
    """Runtime options for an endpoint's chain. ``resolve`` finds a version (it may
    do I/O: call this off the event loop); ``replicas_for`` gives its backends."""
    options: list[FallbackOption] = []
    for index, step in enumerate(chain.steps):
        if isinstance(step, VersionFallback):
            version = resolve(step.model, step.version)
            problems = schema_problems(primary.manifest, version.manifest)
            if problems:
                raise Unprocessable(
                    f"fallback step {index}: {version.ref} cannot stand in for {primary.ref}: "
                    + "; ".join(problems),
                    code="incompatible_fallback",
                    problems=problems,
                )
            options.append(VersionOption(version, tuple(replicas_for(version))))
        elif isinstance(step, CacheFallback):
            cache = caches.for_endpoint(
                endpoint, max_entries=step.max_entries, ttl_seconds=step.ttl_seconds
            )
            options.append(CacheOption(cache))
        elif isinstance(step, StaticFallback):
            options.append(StaticOption(static_outputs(primary.manifest, step.outputs)))
        elif isinstance(step, UnavailableFallback):
            options.append(UnavailableOption(step.message))
    return options


# ---- execution
CALLER_ERRORS = frozenset(
    {"invalid", "too_large", "unprocessable", "forbidden", "payment_required", "unauthenticated"}
)
"""Error kinds that are about the request, not the backend: never retried, no fallback."""


def with_attempts(error: ModelportError, attempts: Sequence[Attempt]) -> ModelportError:
    """The same error, carrying the attempts made (a problem field on ``/api``)."""
    extra = dict(error.extra)
    extra["attempts"] = [
        {"backend": a.backend, "version": a.version, "outcome": a.outcome} for a in attempts
    ]
    copy = type(error)(error.message, code=error.code, **extra)
    copy.__cause__ = error.__cause__
    return copy


def _selected(request: BackendRequest, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    if request.outputs is None:
        return dict(outputs)
    return {name: outputs[name] for name in request.outputs if name in outputs}


def static_answer(option: StaticOption, request: BackendRequest) -> dict[str, np.ndarray]:
    """The fixed outputs, one row per request row where the output is batched."""
    rows = 1
    batched = {t.name for t in request.version.manifest.outputs if t.shape and t.shape[0] == -1}
    for spec in request.version.manifest.inputs:
        array = request.inputs.get(spec.name)
        if array is not None and spec.shape and spec.shape[0] == -1 and array.ndim:
            rows = max(rows, int(array.shape[0]))
    answer = {}
    for name, array in option.outputs.items():
        if name in batched and array.ndim and array.shape[0] == 1 and rows > 1:
            array = np.repeat(array, rows, axis=0)
        answer[name] = array
    return _selected(request, answer)


def tensor_stand_in(
    option: CacheOption | StaticOption,
    request: BackendRequest,
    reason: str,
    attempts: Sequence[Attempt],
) -> Served | None:
    """A whole answer that needs no backend: a fresh cached answer to the same inputs
    (None when there is none), or the static outputs."""
    if isinstance(option, StaticOption):
        return Served(
            outputs=static_answer(option, request),
            provenance=Provenance(None, None, FallbackKind.STATIC, reason, tuple(attempts)),
        )
    hit = option.cache.get(input_key(request))
    if hit is None:
        return None
    cached, age = hit
    return Served(
        outputs=_selected(request, cached.outputs),
        provenance=Provenance(
            cached.version, None, FallbackKind.CACHE, reason, tuple(attempts), age_seconds=age
        ),
    )


async def run_chain(
    options: Sequence[FallbackOption],
    request: ReqT,
    failure: ModelportError,
    *,
    mode: CallMode[ReqT, WonT, OutT],
    attempts: list[Attempt],
    run_version: RunVersion[ReqT, WonT],
    endpoint: str = "",
    metrics: ServingMetrics | None = None,
    clock: Clock | None = None,
) -> OutT:
    """Try the fallback steps in order after the primary failed with ``failure``:
    versions through ``run_version`` (the replica loop), answers that need no backend
    through ``mode.stand_in``."""
    reason = failure.code

    def counted(kind: FallbackKind) -> None:
        if metrics is not None:
            metrics.fallback(endpoint, kind.value)

    for option in options:
        if isinstance(option, VersionOption):
            problems = schema_problems(request.version.manifest, option.version.manifest)
            if problems:  # checked when configured: a version changed since is never used
                log.warning(
                    "fallback %s skipped for %s: %s",
                    option.version.ref,
                    request.version.ref,
                    "; ".join(problems),
                )
                continue
            if (clock or SystemClock()).monotonic() >= request.deadline:
                continue
            try:
                won = await run_version(
                    mode.retarget(request, option.version), option.replicas, attempts
                )
            except ModelportError:
                continue
            counted(FallbackKind.VERSION)
            return mode.answer(
                won,
                Provenance(
                    option.version, won.backend, FallbackKind.VERSION, reason, tuple(attempts)
                ),
            )
        elif isinstance(option, UnavailableOption):
            counted(FallbackKind.UNAVAILABLE)
            raise with_attempts(
                Unavailable(
                    option.message,
                    code="endpoint_unavailable",
                    fallback=FallbackKind.UNAVAILABLE.value,
                    reason=reason,
                ),
                attempts,
            )
        else:
            answer = mode.stand_in(option, request, reason, attempts)
            if answer is None:
                continue  # no fresh cached answer, or a mode (a stream) that takes none
            counted(FallbackKind.CACHE if isinstance(option, CacheOption) else FallbackKind.STATIC)
            return answer
    raise with_attempts(failure, attempts)
