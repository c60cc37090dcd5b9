"""An endpoint's trace: ``:predict`` under its server span, the primary's failed attempt
and the fallback chain's attempt as their own spans, the shadow copy as its own span; and
a remote backend that receives the call's ``traceparent`` and continues its trace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from modelport.api.worker import create_worker_app
from modelport.app import build_worker_services
from modelport.clock import ManualClock
from modelport.config import Role
from modelport.observability import tracing
from tests.api_v2.conftest import AUTH
from tests.conftest import LiveServer
from tests.polling import eventually
from tests.serving.conftest import Serving, add_constant, failing
from tests.tracing.conftest import (
    Traced,
    TracedFactory,
    children,
    in_memory_tracing,
    named,
    one,
    trace_of,
)

PREDICT = "POST /api/endpoints/{name}:predict"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def serving_of(platform: Traced) -> Serving:
    return Serving(platform.client, platform.services, ManualClock())


def test_a_fallback_attempt_is_a_span_of_its_own(traced: Traced) -> None:
    serving = serving_of(traced)
    serving.publish("acme/fraud", "2", model=failing())
    serving.publish("acme/fraud", "3", model=add_constant(3.0))
    chain = {"steps": [{"kind": "version", "model": "acme/fraud", "version": "3"}]}
    serving.endpoint("fraud", fallback=chain)
    serving.deploy("fraud", [("acme/fraud:2", 100)])
    traced.clear()
    answer = serving.predict("fraud", headers={"X-Request-Id": "req-fb"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["model_version"] == "3"
    spans = traced.spans()
    server = one(spans, PREDICT)
    assert server.attributes is not None
    assert server.attributes[tracing.REQUEST_ID] == "req-fb"
    assert server.attributes[tracing.PREDICTION_ID] == answer.json()["prediction_id"]
    assert server.attributes[tracing.ENDPOINT] == "fraud"
    steps = [s.name for s in children(spans, server)]
    for step in ("authorize", "admit", "moderate", "reserve", "dispatch", "record"):
        assert step in steps, steps
    (dispatch,) = [s for s in children(spans, server) if s.name == "dispatch"]
    primary, fallback = children(spans, dispatch)
    assert primary.name == "attempt" and fallback.name == "fallback attempt"
    assert primary.attributes is not None and fallback.attributes is not None
    assert primary.attributes[tracing.VERSION] == "acme/fraud:2"
    assert not primary.status.is_ok  # the failing version's error, recorded
    assert any(event.name == "exception" for event in primary.events)
    assert fallback.attributes[tracing.VERSION] == "acme/fraud:3"
    assert fallback.attributes[tracing.FALLBACK] is True
    assert fallback.status.is_ok
    assert trace_of(spans, server) == spans


def test_the_shadow_copy_is_a_span_of_its_own(traced: Traced) -> None:
    serving = serving_of(traced)
    serving.publish("acme/fraud", "1", model=add_constant(1.0))
    serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    serving.deploy("fraud", [("acme/fraud:1", 100)], shadow={"model": "acme/fraud", "version": "2"})
    traced.clear()
    assert serving.predict("fraud").status_code == 200
    assert eventually(lambda: len(named(traced.spans(), "shadow")) == 1)
    spans = traced.spans()
    server = one(spans, PREDICT)
    shadow = one(spans, "shadow")
    (dispatch,) = [s for s in children(spans, server) if s.name == "dispatch"]
    assert shadow.parent is not None and shadow.parent.span_id == dispatch.context.span_id  # type: ignore[union-attr]
    assert shadow.attributes is not None
    assert shadow.attributes[tracing.VERSION] == "acme/fraud:2"
    # The copy's own wait and execution, under its span.
    assert "execute" in [s.name for s in children(spans, shadow)]


@pytest.fixture
def remote(make_traced: TracedFactory) -> Iterator[tuple[Traced, LiveServer]]:
    """A second installation, traced, served on a loopback port."""
    platform = make_traced()
    serving_of(platform).publish("acme/adder", "1")
    server = LiveServer(platform.services).start()
    yield platform, server
    server.stop()


def test_a_remote_backend_continues_the_calls_trace(
    make_traced: TracedFactory, remote: tuple[Traced, LiveServer]
) -> None:
    far, server = remote
    gateway = make_traced()
    serving = serving_of(gateway)
    serving.publish("acme/adder", "1")
    serving.ensure_tenant("acme")
    from tests.conftest import ADMIN_KEY

    declared = gateway.client.post(
        "/api/backends",
        json={
            "name": "far",
            "tenant": "acme",
            "kind": "remote_v2",
            "url": server.url,
            "api_key": ADMIN_KEY,
            "capabilities": {"formats": ["onnx"]},
        },
    )
    assert declared.status_code == 201, declared.text
    serving.endpoint("adder")
    version = {"model": "acme/adder", "version": "1", "weight": 100, "backends": ["far"]}
    created = gateway.client.post("/api/endpoints/adder/deployments", json={"versions": [version]})
    assert created.status_code == 202, created.text
    serving.wait("adder", created.json()["id"])
    gateway.clear()
    far.clear()
    answer = serving.predict("adder")
    assert answer.status_code == 200, answer.text
    spans = gateway.spans()
    server_span = one(spans, PREDICT)
    (dispatch,) = [s for s in children(spans, server_span) if s.name == "dispatch"]
    (attempt,) = children(spans, dispatch)
    assert attempt.attributes is not None and attempt.attributes[tracing.BACKEND] == "far"
    infer = "POST /v2/models/{owner}/{name}/versions/{version}/infer"
    assert eventually(lambda: len(named(far.spans(), infer)) == 1)
    (received,) = named(far.spans(), infer)
    # The remote's server span: in the caller's trace, child of the attempt that called it.
    assert received.context is not None and attempt.context is not None
    assert received.context.trace_id == attempt.context.trace_id
    assert received.parent is not None and received.parent.is_remote
    assert received.parent.span_id == attempt.context.span_id


def test_a_worker_continues_the_gateways_trace(traced: Traced) -> None:
    serving_of(traced).publish("acme/adder", "1")
    settings = traced.services.settings.model_copy(update={"role": Role.WORKER})
    tracing_, exporter = in_memory_tracing()
    services = build_worker_services(settings, tracing=tracing_)
    try:
        with TestClient(create_worker_app(services), headers=AUTH) as client:
            answer = client.post(
                "/v2/models/acme/adder/versions/1/infer",
                json={
                    "inputs": [
                        {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
                    ]
                },
                headers={"traceparent": TRACEPARENT},
            )
            assert answer.status_code == 200, answer.text
    finally:
        services.close()
    spans = list(exporter.get_finished_spans())
    server = one(spans, "POST /v2/models/{owner}/{name}/versions/{version}/infer")
    assert server.parent is not None and server.parent.is_remote
    assert format(server.parent.span_id, "016x") == TRACEPARENT.split("-")[2]
    # Its host's wait and execution, under the request's span.
    assert [s.name for s in children(spans, server)][-1] == "execute"
