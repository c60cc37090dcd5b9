"""``GET /api/endpoints/{name}/traffic``: predictions, errors by code, fallbacks and
latency per version (a shadow's copies apart) from the prediction log; the endpoint's
tenant only; a bad window refused with ``invalid_window``."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.serving.conftest import Serving, add_constant, failing


def logged(serving: Serving, at_least: int, **params: str) -> dict[str, Any]:
    """The report, once the log holds ``at_least`` predictions of the endpoint."""
    deadline = time.monotonic() + 30
    while True:
        response = serving.client.get("/api/endpoints/fraud/traffic", params=params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if sum(v["predictions"] for v in body["versions"]) >= at_least:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def test_each_versions_errors_and_latency_are_reported(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=failing())
    serving.publish("acme/fraud", "9", model=add_constant(5.0))
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 50), (v2, 50)], shadow={"model": "acme/fraud", "version": "9"})
    seen: Counter[str] = Counter()
    for _ in range(30):
        response = serving.predict("fraud")
        seen["ok" if response.status_code == 200 else "error"] += 1
    assert seen["ok"] > 0 and seen["error"] > 0, seen
    shadowed = seen["ok"]  # copies go only with the answered ones
    body = logged(serving, 30 + shadowed)
    rows = {(v["version"], v["shadow"]): v for v in body["versions"]}
    assert set(rows) == {("1", False), ("2", False), ("9", True)}
    stable, candidate, shadow = rows["1", False], rows["2", False], rows["9", True]
    assert stable["predictions"] == seen["ok"] and stable["errors"] == 0
    assert stable["error_rate"] == 0.0 and stable["latency_ms"]["p50"] > 0
    assert candidate["predictions"] == candidate["errors"] == seen["error"]
    assert candidate["error_rate"] == 1.0 and candidate["latency_ms"]["p99"] is None
    assert sum(candidate["error_codes"].values()) == seen["error"]
    assert shadow["predictions"] == shadowed and shadow["errors"] == 0
    assert body["truncated"] is False
    # A window before the predictions holds none of them.
    earlier = datetime.now(UTC) - timedelta(hours=2)
    before = serving.client.get(
        "/api/endpoints/fraud/traffic",
        params={"since": (earlier - timedelta(hours=1)).isoformat(), "until": earlier.isoformat()},
    )
    assert before.status_code == 200 and before.json()["versions"] == []


def test_another_tenant_and_a_bad_window_are_refused(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    serving.ensure_tenant("gamma")
    tenancy = serving.services.tenancy
    tenancy.add_member("gamma", "gil", roles=["owner"], actor="admin")
    key = tenancy.create_key("gamma", "gil", name="k", actor="admin").secret
    other = serving.client.get(
        "/api/endpoints/fraud/traffic", headers={"Authorization": f"Bearer {key}"}
    )
    assert other.status_code == 404 and other.json()["code"] == "endpoint_not_found"
    now = datetime.now(UTC)
    for since, until in ((now, now - timedelta(hours=1)), (now - timedelta(days=40), now)):
        bad = serving.client.get(
            "/api/endpoints/fraud/traffic",
            params={"since": since.isoformat(), "until": until.isoformat()},
        )
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_window", bad.text
    missing = serving.client.get("/api/endpoints/NOT%20A%20NAME/traffic")
    assert missing.status_code == 404 and missing.json()["code"] == "endpoint_not_found"


def test_a_window_past_the_calendars_edge_is_refused_not_a_crash(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    # The default window reaches back a day from 'until': before year 1 there is none;
    # and a time whose UTC falls outside years 1-9999 is no window either.
    for params in (
        {"until": "0001-01-01T00:00:00"},
        {"until": "0001-01-01T10:00:00+00:00"},
        {"since": "0001-01-01T00:00:00+14:00", "until": "0001-01-01T05:00:00+14:00"},
        {"since": "9999-12-31T20:00:00-14:00", "until": "9999-12-31T23:00:00-14:00"},
    ):
        bad = serving.client.get("/api/endpoints/fraud/traffic", params=params)
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_window", bad.text
