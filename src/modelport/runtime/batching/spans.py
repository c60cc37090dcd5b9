"""The runtime's part of a call's trace, recorded after the fact by the batcher.

A request waits in its version's queue, then runs in a batch with others. When its batch
is answered, the batcher records (on the event loop, with the times it measured), for
each request whose caller's span is sampled, two spans under the span that submitted it
(the call's ``dispatch`` step, or an endpoint's replica attempt):

- its wait, named ``batch wait`` when an executor was free as it came (it waited for
  the batch to form) and ``queue wait`` when every executor was busy;
- ``execute``: the executed batch, with its rows and requests as attributes. The first
  sampled request's is the batch's: it links the span of every other sampled call the
  batch merged, and each of theirs links the first's (two links per call: linking
  every call to every other would cost the SDK a link object per pair).

Nothing is kept or made for a request whose caller was sampled out; with no tracer the
batcher records nothing and asks for no context.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, Tracer

BATCH_WAIT = "batch wait"
QUEUE_WAIT = "queue wait"
EXECUTE = "execute"


@dataclass(frozen=True, slots=True)
class Traced:
    """What a queued request needs for its spans: its caller's span, and whether an
    executor was free when it came."""

    parent: SpanContext
    executor_free: bool


def traced_request(executor_free: bool) -> Traced | None:
    """The current (submitting) span's context if it is sampled, else None: a request
    sampled out costs nothing more."""
    context = trace.get_current_span().get_span_context()
    if not context.trace_flags.sampled:
        return None
    return Traced(context, executor_free)


@dataclass(frozen=True, slots=True)
class Timed:
    """One request of an executed batch: its spans' context and its times (monotonic)."""

    traced: Traced
    enqueued_at: float
    started_at: float


def record_batch(
    tracer: Tracer,
    name: str,
    requests: Sequence[Timed],
    *,
    started_at: float,
    rows: int,
    size: int,
    now: float,
    error: BaseException | None = None,
) -> None:
    """The spans of a batch of ``size`` requests that ran from ``started_at`` until ``now``
    (the batcher's clock); ``requests``: those whose caller's span is sampled (see the
    module docstring)."""
    wall = time.time_ns()

    def at(moment: float) -> int:
        return wall - int((now - moment) * 1e9)

    attributes: dict[str, str | int] = {
        "modelport.version": name,
        "modelport.batch.rows": rows,
        "modelport.batch.requests": size,
    }
    lead = [Link(requests[0].traced.parent)] if requests else []
    for index, request in enumerate(requests):
        parent = trace.set_span_in_context(trace.NonRecordingSpan(request.traced.parent))
        wait = BATCH_WAIT if request.traced.executor_free else QUEUE_WAIT
        tracer.start_span(wait, context=parent, start_time=at(request.enqueued_at)).end(
            at(request.started_at)
        )
        merged = [Link(other.traced.parent) for other in requests[1:]] if index == 0 else lead
        execute = tracer.start_span(
            EXECUTE,
            context=parent,
            links=merged,
            attributes=attributes,
            start_time=at(request.started_at),
        )
        if error is not None:
            execute.record_exception(error)
            execute.set_status(trace.StatusCode.ERROR, type(error).__name__)
        execute.end(wall)
