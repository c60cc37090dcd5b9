"""Sampling decided once at the root (``tracing.RootSampler``): the same decision the
SDK's ``TraceIdRatioBased`` makes on the same trace id, a sampled-out request getting a
bare non-recording span whose ids still reach its log records and what it sends on
(flagged not sampled), a caller's ``traceparent`` followed as before, and the setting
made from the standard variables."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, TraceIdRatioBased
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from modelport.api.request_metrics import RouteTemplates
from modelport.api.tracing import TraceMiddleware
from modelport.app import build_tracing
from modelport.observability import tracing
from modelport.observability.tracing import PresetIds, RootSampler

RATIO = 0.3
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _tracer(ratio: float) -> tuple[trace.Tracer, RootSampler, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    ids = PresetIds()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)), id_generator=ids)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("modelport"), RootSampler(ratio, ids), exporter


def test_the_root_decision_is_the_samplers_on_the_same_trace_id() -> None:
    tracer, roots, _ = _tracer(RATIO)
    rule = TraceIdRatioBased(RATIO)
    sampled = 0
    for _ in range(2000):
        unsampled = roots.root()
        if unsampled is None:
            span = tracer.start_span("root")  # takes the trace id the decision was made on
            trace_id = span.get_span_context().trace_id
            assert span.is_recording()
            span.end()
            sampled += 1
        else:
            context = unsampled.get_span_context()
            assert context.is_valid and not context.trace_flags.sampled
            assert not unsampled.is_recording()
            trace_id = context.trace_id
        expected = rule.should_sample(None, trace_id, "root").decision
        assert (expected is Decision.RECORD_AND_SAMPLE) == (unsampled is None)
    assert 0 < sampled < 2000
    # A trace id drawn for a decision is used once: the next root draws its own.
    assert tracer.start_span("x").get_span_context().trace_id != trace_id


def _app(ratio: float) -> tuple[TestClient, InMemorySpanExporter]:
    tracer, roots, exporter = _tracer(ratio)

    async def seen(request: Request) -> JSONResponse:
        context = trace.get_current_span().get_span_context()
        return JSONResponse(
            {"trace_id": format(context.trace_id, "032x"), "sent": tracing.carrier()}
        )

    routes = [Route("/v2/seen", seen, methods=["GET"])]
    inner = Starlette(routes=routes)
    app = TraceMiddleware(inner, tracer, RouteTemplates.of(routes), roots)
    return TestClient(app), exporter  # type: ignore[arg-type]


@pytest.mark.parametrize("ratio", [0.0, RATIO, 1.0])
def test_only_sampled_requests_make_spans_and_every_request_carries_ids(ratio: float) -> None:
    client, exporter = _app(ratio)
    answers = [client.get("/v2/seen").json() for _ in range(200)]
    exported = {format(s.context.trace_id, "032x") for s in exporter.get_finished_spans()}  # type: ignore[union-attr]
    for answer in answers:
        traceparent = answer["sent"]["traceparent"]
        assert traceparent.split("-")[1] == answer["trace_id"]
        flags = int(traceparent.rsplit("-", 1)[1], 16)
        assert bool(flags & 1) == (answer["trace_id"] in exported)
    assert len(exported) == sum(int(a["sent"]["traceparent"][-2:], 16) & 1 for a in answers)
    if ratio == 0.0:
        assert exported == set()
    if ratio == 1.0:
        assert len(exported) == 200


def test_a_callers_sampled_trace_is_continued_whatever_the_ratio() -> None:
    client, exporter = _app(0.0)
    answer = client.get("/v2/seen", headers={"traceparent": TRACEPARENT}).json()
    assert answer["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    [server] = exporter.get_finished_spans()
    assert server.parent is not None and server.parent.span_id == 0x00F067AA0BA902B7


@pytest.mark.parametrize(
    ("sampler", "ratio"),
    [
        ("parentbased_traceidratio", 0.25),
        ("traceidratio", 0.25),
        ("parentbased_always_off", 0.0),
        ("parentbased_always_on", None),
    ],
)
def test_the_root_ratio_comes_from_the_standard_variables(
    sampler: str, ratio: float | None
) -> None:
    built = build_tracing(
        {
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_TRACES_SAMPLER": sampler,
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
        }
    )
    try:
        if ratio is None:
            assert built.roots is None
        else:
            assert built.roots is not None
            assert built.roots.bound == round(ratio * 2**64)
    finally:
        built.shutdown()
