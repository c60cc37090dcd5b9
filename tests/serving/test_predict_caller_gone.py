"""An endpoint's :predict caller that hangs up while the model runs: the call is cancelled,
metered ``cancelled`` (no prediction billed), and its idempotency key freed so that a
retry runs (on both databases)."""

from __future__ import annotations

import socket

import httpx
import orjson
import pytest

from modelport.metering.types import Unit, UsageStatus
from tests.conftest import ADMIN_KEY, LiveServer
from tests.metering.test_caller_gone import Gate, hang_up
from tests.polling import eventually
from tests.serving.conftest import ROW, Serving


def test_a_predict_caller_that_hangs_up_is_cancelled_and_its_key_freed(
    serving_db: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    serving = serving_db
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    price = {"model": "acme/fraud", "unit": "prediction", "unit_price_micros": 2_500}
    assert serving.client.post("/api/prices", json=price).status_code == 201
    assert serving.predict("fraud").status_code == 200  # loaded and warm
    gate = Gate()
    gate.install(monkeypatch)
    serving.client.__exit__(None, None, None)  # one app runs the lifespan at a time
    server = LiveServer(serving.services).start()
    try:
        body = orjson.dumps({"inputs": {"x": ROW}})
        head = (
            "POST /api/endpoints/fraud:predict HTTP/1.1\r\nHost: modelport\r\n"
            f"Authorization: Bearer {ADMIN_KEY}\r\nIdempotency-Key: order-7\r\n"
            "X-Request-Id: gone-3\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(head.encode() + body)
        assert gate.entered.wait(60), "the call never reached the model"
        hang_up(sock)
        metering = serving.services.metering

        def gone() -> list[object]:
            metering.deliver()
            return [e.event for e in metering.ledger.entries() if e.event.request_id == "gone-3"]

        assert eventually(lambda: len(gone()) == 1)
        [event] = gone()
        assert (event.unit, event.status) == (Unit.PREDICTION, UsageStatus.CANCELLED)
        assert (event.quantity, event.amount_micros) == (0, 0)
        gate.opened.set()
        # Nothing was answered under the key: a retry runs, and is billed once.
        retry = httpx.post(
            f"{server.url}/api/endpoints/fraud:predict",
            json={"inputs": {"x": ROW}},
            headers={"Authorization": f"Bearer {ADMIN_KEY}", "Idempotency-Key": "order-7"},
            timeout=30,
        )
        assert retry.status_code == 200, retry.text
        assert "Idempotent-Replayed" not in retry.headers
    finally:
        gate.opened.set()
        server.stop()
