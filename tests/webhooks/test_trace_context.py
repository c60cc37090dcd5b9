"""A webhook delivery carries the W3C trace context of what enqueued it (a job's end
runs in its ``job`` span), on every attempt; one enqueued outside a span carries none."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from modelport.observability import tracing
from modelport.webhooks.service import WebhookService
from tests.webhooks.conftest import Receiver

EVENT = {"job": "job_1", "state": "succeeded"}


def test_a_delivery_carries_the_enqueuing_spans_traceparent(
    webhooks: WebhookService, receiver: Receiver
) -> None:
    webhooks.rotate_secret("acme")
    tracer = TracerProvider().get_tracer("test")
    with tracing.span_under(tracer, "job") as span:
        webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
        expected = tracing.carrier()
    webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_2")
    assert webhooks.drain() == 2
    by_parent = {got.headers.get("traceparent"): got for got in receiver.requests}
    assert set(by_parent) == {expected["traceparent"], None}
    context = span.get_span_context()
    assert expected["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
