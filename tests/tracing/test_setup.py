"""Tracing's set-up from the standard ``OTEL_*`` variables (off by default), spans
exported over OTLP/HTTP to a real receiver, tracing off adding nothing, and log records
carrying the trace and span ids beside the request id."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import Tracer as SdkTracer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from modelport import logs
from modelport.api.tracing import TraceMiddleware
from modelport.app import build_tracing
from modelport.observability import tracing
from tests.conftest import ThreadedServer
from tests.tracing.conftest import TracedFactory, one

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"},
        {"OTEL_TRACES_SAMPLER": "always_on"},  # a sampler alone exports nowhere
    ],
)
def test_tracing_is_off_unless_an_exporter_is_named(environ: dict[str, str]) -> None:
    assert build_tracing(environ).tracer is None


@pytest.mark.parametrize(
    ("environ", "sampler"),
    [
        ({"OTEL_TRACES_EXPORTER": "console"}, "ParentBased{root:AlwaysOnSampler"),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": "0.1",
            },
            "ParentBased{root:TraceIdRatioBased{0.1}",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio"},
            "TraceIdRatioBased{1.0}",
        ),
    ],
)
def test_an_exporter_turns_it_on_with_the_named_sampler(
    environ: dict[str, str], sampler: str
) -> None:
    built = build_tracing(environ)
    try:
        assert isinstance(built.tracer, SdkTracer)
        assert built.tracer.sampler.get_description().startswith(sampler)
        assert built.tracer.resource.attributes["service.name"] == "modelport"
    finally:
        built.shutdown()


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"},
            "OTEL_TRACES_SAMPLER",
        ),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_TRACES_SAMPLER": "traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": "2",
            },
            "OTEL_TRACES_SAMPLER_ARG",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
    ],
)
def test_a_setting_it_cannot_honour_fails_the_start_naming_it(
    environ: dict[str, str], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        build_tracing(environ)


class Receiver:
    """An OTLP/HTTP trace receiver on a loopback port: the export requests it got."""

    def __init__(self) -> None:
        self.received: list[ExportTraceServiceRequest] = []

        async def traces(request: Request) -> Response:
            message = ExportTraceServiceRequest()
            message.ParseFromString(await request.body())
            self.received.append(message)
            return Response(b"", media_type="application/x-protobuf")

        self.server = ThreadedServer(
            Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
        )

    def span_names(self) -> set[str]:
        return {
            span.name
            for message in self.received
            for resource in message.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        }


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    made.server.start()
    yield made
    made.server.stop()


def test_spans_are_exported_over_otlp_to_the_named_endpoint(receiver: Receiver) -> None:
    built = build_tracing(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.server.url, "OTEL_SERVICE_NAME": "mp-test"}
    )
    assert built.tracer is not None
    with tracing.span_under(built.tracer, "exported"):
        pass
    built.shutdown()  # flushes the batch
    assert receiver.span_names() == {"exported"}
    (resource,) = receiver.received[0].resource_spans
    names = [a.value.string_value for a in resource.resource.attributes if a.key == "service.name"]
    assert names == ["mp-test"]


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    captured = io.StringIO()
    level = logging.getLogger().level
    logs.configure("json", "INFO", captured)
    yield captured
    logs.unconfigure()
    logging.getLogger().setLevel(level)


def _records(captured: io.StringIO, event: str) -> list[dict[str, str]]:
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    return [line for line in lines if line.get("event") == event]


def test_log_records_carry_the_trace_and_span_ids(
    make_traced: TracedFactory, log_lines: io.StringIO
) -> None:
    traced = make_traced()
    traced.publisher.adder()  # its version's publication is logged, in its request
    (record,) = _records(log_lines, "version.published")
    server = one(traced.spans(), "POST /api/models/{owner}/{name}/versions")
    assert server.context is not None and server.attributes is not None
    assert record["request_id"] == server.attributes[tracing.REQUEST_ID]
    assert record["trace_id"] == format(server.context.trace_id, "032x")
    assert record["span_id"] == format(server.context.span_id, "016x")


def test_tracing_off_adds_no_span_and_no_ids(
    make_traced: TracedFactory, log_lines: io.StringIO
) -> None:
    off = make_traced(traced=False)
    assert off.services.tracing.tracer is None
    assert off.services.inference.pipeline.tracer is None
    off.publisher.adder()
    response = off.client.post(
        "/v2/models/acme/adder/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
        headers={"traceparent": TRACEPARENT},
    )
    assert response.status_code == 200, response.text
    assert off.spans() == []
    # No server span in the stack, and nothing continues the caller's trace.
    stack = off.client.app.middleware_stack  # type: ignore[attr-defined]
    while stack is not None and not isinstance(stack, TraceMiddleware):
        stack = getattr(stack, "app", None)
    assert stack is None
    (record,) = _records(log_lines, "version.published")
    assert "trace_id" not in record
