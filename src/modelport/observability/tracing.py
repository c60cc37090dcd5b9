"""Traces: the process's tracer, the W3C trace context in and out, and the names the
platform's spans and attributes carry.

Tracing is off unless ``modelport.app`` built a tracer (``Tracing``; the standard
``OTEL_*`` variables decide, see ``docs/observability.md``). Everything here takes the
tracer as an argument, and every caller checks ``tracer is None`` before doing any
tracing work, so that a call with tracing off costs no span, not even a no-op one.

The context travels with the OpenTelemetry API's context (a ``contextvars`` value): a
span opened around a call is the parent of everything the call does on its task and on
the tasks it starts. Where work leaves the process (a remote backend, a webhook) or
outlives the request (a job's stages), it carries the W3C ``traceparent`` and
``tracestate`` of the span that sent it (``carrier``), and the receiver continues the
trace from them (``context_of``).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "CALL_ID",
    "PREDICTION_ID",
    "REQUEST_ID",
    "TRACER_NAME",
    "PresetIds",
    "RootSampler",
    "Tracing",
    "carrier",
    "context_of",
    "inject",
    "span_under",
]

TRACER_NAME = "modelport"

REQUEST_ID = "modelport.request_id"
"""The request's ``X-Request-Id`` (as on its log records)."""
CALL_ID = "modelport.call_id"
"""A repeatable call's id (``Caller.call_id``: a job's or a batch line's)."""
PREDICTION_ID = "modelport.prediction_id"
"""The metered call's prediction id (its usage events, its prediction-log record)."""
JOB_ID = "modelport.job_id"
BACKEND = "modelport.backend"
VERSION = "modelport.version"
ENDPOINT = "modelport.endpoint"
FALLBACK = "modelport.fallback"
"""True on an attempt of an endpoint's fallback chain."""
OUTCOME = "modelport.outcome"
FIRST_TOKEN_MS = "modelport.stream.time_to_first_token_ms"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

_PROPAGATOR = TraceContextTextMapPropagator()
"""W3C trace context only (``traceparent``, ``tracestate``): no baggage is passed on."""


_UNSAMPLED = TraceFlags(TraceFlags.RANDOM_TRACE_ID)
"""Not sampled; the trace id random (W3C level 2), as the SDK flags the roots it makes."""
_LOW_64 = (1 << 64) - 1


class PresetIds:
    """The SDK's ids (an ``opentelemetry.sdk.trace.id_generator.IdGenerator``: random,
    never zero), except that a trace id drawn beforehand by ``RootSampler`` on this
    thread is the next root's: the sampler's decision was made on it."""

    def __init__(self) -> None:
        self._preset = threading.local()

    def generate_span_id(self) -> int:
        span_id = random.getrandbits(64)
        while span_id == 0:
            span_id = random.getrandbits(64)
        return span_id

    def generate_trace_id(self) -> int:
        preset: int | None = getattr(self._preset, "trace_id", None)
        if preset is not None:
            self._preset.trace_id = None
            return preset
        trace_id = random.getrandbits(128)
        while trace_id == 0:
            trace_id = random.getrandbits(128)
        return trace_id

    def is_trace_id_random(self) -> bool:
        return True

    def preset(self, trace_id: int) -> None:
        self._preset.trace_id = trace_id


class RootSampler:
    """Decides a request's sampling once, at its root, before any span is made: a
    request sampled out gets a bare non-recording span (valid ids, so its log records
    and the ``traceparent`` it sends on carry them, flagged not sampled) without going
    through the SDK's span machinery; a sampled one is started by the tracer, whose
    ``TraceIdRatioBased`` sampler decides the same on the same trace id (``PresetIds``).
    Only for the ratio samplers (``traceidratio``, ``parentbased_traceidratio``,
    ``..._always_off``): the rule is theirs, a trace id's low 64 bits under
    ``ratio * 2**64``."""

    def __init__(self, ratio: float, ids: PresetIds) -> None:
        self.bound = round(ratio * (_LOW_64 + 1))
        self.ids = ids

    def root(self) -> Span | None:
        """A non-recording span for a root sampled out; None for a sampled one (start
        it with the tracer, on this thread, before any other root)."""
        trace_id = random.getrandbits(128) or 1  # never the invalid 0
        if trace_id & _LOW_64 < self.bound:
            self.ids.preset(trace_id)
            return None
        span_id = random.getrandbits(64) or 1
        return NonRecordingSpan(SpanContext(trace_id, span_id, False, _UNSAMPLED))


@dataclass(frozen=True)
class Tracing:
    """The process's tracer (None: tracing is off) and what ends it: ``shutdown``
    flushes the spans not exported yet, once, as the process closes its services.
    ``roots``: the sampling decided at the root where the sampler allows it (see
    ``RootSampler``; None: every root span is the tracer's)."""

    tracer: Tracer | None = None
    shutdown: Callable[[], None] = field(default=lambda: None)
    roots: RootSampler | None = None

    @property
    def enabled(self) -> bool:
        return self.tracer is not None


def carrier(context: Context | None = None) -> dict[str, str]:
    """The W3C headers of ``context`` (the current one by default): ``traceparent`` and,
    when set, ``tracestate``; empty without a valid span."""
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers, context=context)
    return headers


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's ``traceparent`` (and ``tracestate``) to ``headers``; nothing
    without one (tracing off, or no span open)."""
    _PROPAGATOR.inject(headers)


def context_of(headers: Mapping[str, str] | None) -> Context | None:
    """The remote parent ``headers`` (a ``traceparent``, maybe a ``tracestate``) name, or
    None when they name none (absent or malformed: the trace starts here)."""
    if not headers:
        return None
    found = _PROPAGATOR.extract(headers)
    if not trace.get_current_span(found).get_span_context().is_valid:
        return None
    return found


@contextmanager
def span_under(
    tracer: Tracer,
    name: str,
    parent: Span | Context | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, str | int | float | bool] | None = None,
) -> Iterator[Span]:
    """A span named ``name``, current while the block runs, child of ``parent`` (a span,
    or a context such as ``context_of`` gives) or of the current span when None. An
    exception leaving the block is recorded on it and sets its status to error (as the
    SDK's ``start_as_current_span`` does, without its layers of context managers)."""
    context = trace.set_span_in_context(parent) if isinstance(parent, Span) else parent
    span = tracer.start_span(name, context=context, kind=kind, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield span
    except Exception as exc:
        if span.is_recording():
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        otel_context.detach(token)
        span.end()
