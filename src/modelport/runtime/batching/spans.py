"""The runtime's part of a call's trace, recorded after the fact by the batcher.

A request waits in its version's queue, then runs in a batch with others. When its batch
is answered, the batcher records (on the event loop, with the times it measured):

- one span for the executed batch, ``execute batch``, in a trace of its own, linked to
  the span of every call it merged (a batch has many parents, so it has none);
- per request, under the span that submitted it (the call's ``dispatch`` step, or its
  replica attempt): its wait, named ``batch wait`` when an executor was free as it came
  (it waited for the batch to form) and ``queue wait`` when every executor was busy,
  then ``execute``, its share of the batch, linked to the batch's span.

Only requests whose caller's span is sampled get spans; with no tracer the batcher
records nothing and asks for no context.
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
EXECUTE_BATCH = "execute batch"


@dataclass(frozen=True, slots=True)
class Traced:
    """What a queued request needs for its spans: its caller's span, and whether an
    executor was free when it came."""

    parent: SpanContext
    executor_free: bool


def traced_request(executor_free: bool) -> Traced | None:
    """The current (submitting) span's context, if it is sampled, else None."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
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
    error: BaseException | None = None,
) -> None:
    """The spans of a batch that ran from ``started_at`` until now (see the module
    docstring): ``requests`` are its traced ones, ``size`` all of its requests."""
    now = time.monotonic()
    wall = time.time_ns()

    def at(moment: float) -> int:
        return wall - int((now - moment) * 1e9)

    attributes: dict[str, str | int] = {
        "modelport.version": name,
        "modelport.batch.rows": rows,
        "modelport.batch.requests": size,
    }
    batch = tracer.start_span(
        EXECUTE_BATCH,
        context=trace.set_span_in_context(trace.INVALID_SPAN),
        links=[Link(r.traced.parent) for r in requests],
        attributes=attributes,
        start_time=at(started_at),
    )
    if error is not None:
        batch.record_exception(error)
        batch.set_status(trace.StatusCode.ERROR, type(error).__name__)
    batch.end(wall)
    to_batch = [Link(batch.get_span_context())]
    for request in requests:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(request.traced.parent))
        wait = BATCH_WAIT if request.traced.executor_free else QUEUE_WAIT
        tracer.start_span(wait, context=parent, start_time=at(request.enqueued_at)).end(
            at(request.started_at)
        )
        execute = tracer.start_span(
            EXECUTE,
            context=parent,
            links=to_batch,
            attributes=attributes,
            start_time=at(request.started_at),
        )
        if error is not None:
            execute.set_status(trace.StatusCode.ERROR, type(error).__name__)
        execute.end(wall)
