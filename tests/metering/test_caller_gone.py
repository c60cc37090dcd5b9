"""A caller that hangs up while its call runs: the call is cancelled (dropped from the
queue if it has not run, its result discarded if it has) and metered ``cancelled`` as
the price rule says for cancelled work, never billed as an answered prediction.

The model is held in its executor by a gate, so "while it runs" is certain; the caller
is a raw socket that sends a whole request and closes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from modelport.metering.types import BalanceScope, Unit, UsageEvent, UsageStatus
from modelport.runtime.formats.onnx import OnnxModel
from tests.conftest import ADMIN_KEY, LiveServer
from tests.metering.conftest import ADDER_BODY, Platform
from tests.polling import eventually

TENANT = BalanceScope.TENANT


class Gate:
    """Holds every model execution until opened; counts them."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.executions = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = OnnxModel.execute

        def execute(model: OnnxModel, inputs: dict[str, Any]) -> Any:
            self.executions += 1
            self.entered.set()
            self.opened.wait(30)
            return original(model, inputs)

        monkeypatch.setattr(OnnxModel, "execute", execute)


@pytest.fixture
def gated(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Gate, LiveServer]]:
    """acme/adder loaded (its warm-up done), then gated, served over HTTP; beta has a
    balance and the prediction costs 2,500 (``full`` for failures) plus 100 a second."""
    platform.services.metering.balances.credit(TENANT, "beta", 1_000_000, tenant="beta")
    platform.price(2_500, failure_rule="full")
    platform.price(100, unit="second", failure_rule="full")
    assert platform.infer().status_code == 200  # loads the model before the gate
    gate = Gate()
    gate.install(monkeypatch)
    server = platform.live()
    try:
        yield gate, server
    finally:
        gate.opened.set()
        server.stop()


def call(server: LiveServer, key: str, request_id: str) -> socket.socket:
    """Send a whole infer request on a fresh connection; the caller may then hang up."""
    body = orjson.dumps(ADDER_BODY)
    head = (
        "POST /v2/models/acme/adder/infer HTTP/1.1\r\n"
        "Host: modelport\r\n"
        f"Authorization: Bearer {key}\r\n"
        f"X-Request-Id: {request_id}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(head.encode() + body)
    return sock


def hang_up(sock: socket.socket) -> None:
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def queue_depth(server: LiveServer) -> float:
    """acme/adder:1's queue depth, as the server's metrics say."""
    prefix = 'modelport_inference_queue_depth{model="acme/adder",version="1"} '
    text = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).text
    return float(
        next((x for x in text.splitlines() if x.startswith(prefix)), prefix + "0").split()[-1]
    )


def events_of(platform: Platform, request_id: str) -> dict[Unit, UsageEvent]:
    return {e.event.unit: e.event for e in platform.entries() if e.event.request_id == request_id}


def test_a_caller_that_hangs_up_while_its_call_executes_is_not_billed_a_prediction(
    platform: Platform, gated: tuple[Gate, LiveServer]
) -> None:
    gate, server = gated
    balance = platform.services.metering.balances
    # The warm call is billed by the second too, and on a loaded machine its load may
    # take more than one: what this call costs is measured from what is left after it.
    assert eventually(lambda: balance.get(TENANT, "beta").reserved_micros == 0)
    before = balance.get(TENANT, "beta").balance_micros
    assert before <= 1_000_000 - 2_600
    sock = call(server, platform.key, "gone-1")
    assert gate.entered.wait(30), "the call never reached the model"
    hang_up(sock)
    # Settled at once, while the model still runs: the result will be discarded.
    assert eventually(lambda: len(events_of(platform, "gone-1")) == 2)
    events = events_of(platform, "gone-1")
    prediction, second = events[Unit.PREDICTION], events[Unit.SECOND]
    assert {prediction.status, second.status} == {UsageStatus.CANCELLED}
    assert (prediction.quantity, prediction.amount_micros) == (0, 0)  # no answer, no prediction
    assert (second.quantity, second.amount_micros) == (1, 100)  # the time it held, in full
    gate.opened.set()
    assert eventually(lambda: balance.get(TENANT, "beta").reserved_micros == 0)
    assert balance.get(TENANT, "beta").balance_micros == before - 100


def test_a_caller_that_hangs_up_while_queued_never_runs(
    platform: Platform, gated: tuple[Gate, LiveServer]
) -> None:
    gate, server = gated
    running = call(server, platform.key, "stays")
    assert gate.entered.wait(30)
    balances = platform.services.metering.balances
    one_hold = balances.get(TENANT, "beta").reserved_micros
    queued = call(server, platform.key, "gone-2")
    assert eventually(lambda: balances.get(TENANT, "beta").reserved_micros == 2 * one_hold)
    # Held, then queued behind the running call: hung up only once it is in the queue.
    assert eventually(lambda: queue_depth(server) == 1)
    hang_up(queued)
    assert eventually(lambda: len(events_of(platform, "gone-2")) == 2)
    gate.opened.set()
    answer = running.recv(65536)
    running.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert eventually(lambda: len(events_of(platform, "stays")) == 2)
    assert gate.executions == 1  # the queued call left the queue unrun
    gone = events_of(platform, "gone-2")
    assert {e.status for e in gone.values()} == {UsageStatus.CANCELLED}
    assert gone[Unit.PREDICTION].amount_micros == 0 and gone[Unit.PREDICTION].compute_ms == 0
    stays = events_of(platform, "stays")
    assert stays[Unit.PREDICTION].status is UsageStatus.SUCCEEDED
    assert stays[Unit.PREDICTION].amount_micros == 2_500
    assert eventually(lambda: balances.get(TENANT, "beta").reserved_micros == 0)
