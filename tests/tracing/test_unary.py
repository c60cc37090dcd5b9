"""A unary ``/v2`` call's trace: the server span continues the caller's trace, each
pipeline step is its child, the runtime's wait and execution are the dispatch step's,
and the call's ids are on the server span."""

from __future__ import annotations

import numpy as np

from modelport.observability import tracing
from tests.api_v2.conftest import infer_body
from tests.tracing.conftest import Traced, children, one, trace_of

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
ROWS = np.array([[1, 2, 3, 4]], np.float32)


def test_a_unary_call_has_a_span_per_step_under_its_server_span(traced: Traced) -> None:
    traced.publisher.adder()
    traced.client.post("/v2/models/acme/adder/infer", json=infer_body("x", ROWS))  # loads it
    traced.clear()
    response = traced.client.post(
        "/v2/models/acme/adder/infer",
        json=infer_body("x", ROWS),
        headers={"traceparent": TRACEPARENT, "tracestate": "vendor=1", "X-Request-Id": "req-t1"},
    )
    assert response.status_code == 200, response.text
    spans = traced.spans()
    server = one(spans, "POST /v2/models/{owner}/{name}/infer")
    assert server.context is not None and server.parent is not None
    # The caller's trace, continued: same trace id, the caller's span as parent.
    assert format(server.context.trace_id, "032x") == CALLER_TRACE
    assert format(server.parent.span_id, "016x") == CALLER_SPAN
    assert server.parent.is_remote
    assert server.context.trace_state.get("vendor") == "1"
    assert server.attributes is not None
    assert server.attributes[tracing.REQUEST_ID] == "req-t1"
    assert server.attributes["http.response.status_code"] == 200
    assert str(server.attributes[tracing.PREDICTION_ID])
    steps = [span.name for span in children(spans, server)]
    assert steps == [
        "resolve",
        "authorize",
        "read",
        "admit",
        "moderate",
        "reserve",
        "dispatch",
        "record",
        "settle",
        "release",
        "answer",
    ]
    # Every span of the call is in the caller's trace; the executed batch has its own.
    assert trace_of(spans, server) == [s for s in spans if s.name != "execute batch"]


def test_the_dispatch_step_holds_the_attempt_the_wait_and_the_execution(traced: Traced) -> None:
    traced.publisher.adder()
    response = traced.client.post("/v2/models/acme/adder/infer", json=infer_body("x", ROWS))
    assert response.status_code == 200, response.text
    spans = traced.spans()
    server = one(spans, "POST /v2/models/{owner}/{name}/infer")
    (dispatch,) = [s for s in children(spans, server) if s.name == "dispatch"]
    (attempt,) = children(spans, dispatch)
    assert attempt.name == "attempt"
    assert attempt.attributes is not None
    assert attempt.attributes[tracing.VERSION] == "acme/adder:1"
    assert attempt.attributes[tracing.FALLBACK] is False
    # The runtime's part: the request's wait in its queue, then its share of the batch.
    wait, execute = children(spans, attempt)
    assert wait.name in ("batch wait", "queue wait")
    assert execute.name == "execute"
    # The executed batch is a trace of its own, linked to the call it merged.
    batch = one(spans, "execute batch")
    assert batch.parent is None and batch.context is not None
    assert [link.context.span_id for link in batch.links] == [attempt.context.span_id]  # type: ignore[union-attr]
    assert [link.context.span_id for link in execute.links] == [batch.context.span_id]
