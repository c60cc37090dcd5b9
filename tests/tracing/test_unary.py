"""A unary ``/v2`` call's trace: the server span continues the caller's trace, each
pipeline step is its child, the runtime's wait and execution are the dispatch step's,
and the call's ids are on the server span."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from modelport.observability import tracing
from tests.api_v2.conftest import infer_body
from tests.polling import eventually
from tests.serving.conftest import before_executions_of
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
        "authorize",
        "admit",
        "moderate",
        "reserve",
        "dispatch",
        "record",
        "settle",
    ]
    # Every span of the call is in the caller's trace.
    assert trace_of(spans, server) == spans


def test_the_dispatch_step_holds_the_wait_and_the_execution(traced: Traced) -> None:
    traced.publisher.adder()
    response = traced.client.post("/v2/models/acme/adder/infer", json=infer_body("x", ROWS))
    assert response.status_code == 200, response.text
    spans = traced.spans()
    server = one(spans, "POST /v2/models/{owner}/{name}/infer")
    (dispatch,) = [s for s in children(spans, server) if s.name == "dispatch"]
    # The runtime's part: the request's wait in its queue, then its share of the batch
    # (a version called directly has one replica: no attempt span of its own).
    wait, execute = children(spans, dispatch)
    assert wait.name in ("batch wait", "queue wait")
    assert execute.name == "execute"
    assert execute.attributes is not None
    assert execute.attributes["modelport.batch.requests"] == 1
    assert list(execute.links) == []  # it merged no other call


def test_the_executed_batch_links_the_calls_it_merged(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    traced.publisher.adder(resources={"max_batch_size": 8})
    url = "/v2/models/acme/adder/infer"
    assert traced.client.post(url, json=infer_body("x", ROWS)).status_code == 200  # loaded
    gate, entered = threading.Event(), threading.Event()

    def held() -> None:
        entered.set()
        assert gate.wait(60)

    before_executions_of(monkeypatch, "add_one", held)
    traced.clear()
    answers: list[int] = []

    def call(request_id: str) -> None:
        response = traced.client.post(
            url, json=infer_body("x", ROWS), headers={"X-Request-Id": request_id}
        )
        answers.append(response.status_code)

    first = threading.Thread(target=call, args=("req-first",))
    first.start()
    assert entered.wait(60)  # the first call's batch runs, held at the gate
    others = [threading.Thread(target=call, args=(f"req-{n}",)) for n in (2, 3)]
    for thread in others:
        thread.start()
    host = traced.services.host
    assert host is not None
    assert eventually(lambda: sum(s.queued for s in host.statuses()) == 2)
    gate.set()
    for thread in [first, *others]:
        thread.join(60)
    assert answers == [200, 200, 200]
    spans = traced.spans()
    servers = {
        str((s.attributes or {})[tracing.REQUEST_ID]): s
        for s in spans
        if s.name == "POST /v2/models/{owner}/{name}/infer"
    }
    dispatch = {
        request_id: next(s for s in children(spans, server) if s.name == "dispatch")
        for request_id, server in servers.items()
    }
    executed = {
        request_id: next(s for s in children(spans, step) if s.name == "execute")
        for request_id, step in dispatch.items()
    }
    # The two calls that waited ran as one batch: each one's execution links the other.
    for mine, theirs in (("req-2", "req-3"), ("req-3", "req-2")):
        attributes = executed[mine].attributes
        assert attributes is not None and attributes["modelport.batch.requests"] == 2
        linked = [link.context.span_id for link in executed[mine].links]
        assert linked == [dispatch[theirs].context.span_id]  # type: ignore[union-attr]
    assert list(executed["req-first"].links) == []
    waits = {s.name for step in dispatch.values() for s in children(spans, step)}
    assert "queue wait" in waits  # they came while the executor was busy
