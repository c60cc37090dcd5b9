"""Endpoint changes made by one process reach the others' routers at once, through the
change bus, not at their next refresh tick (an hour here)."""

from __future__ import annotations

from tests.metering import conftest as metering_fixtures
from tests.polling import eventually
from tests.serving.conftest import ServingFactory

redis_url = metering_fixtures.redis_url  # the real Redis; skips (or fails) without it

HOUR = 3600.0


def test_a_deployment_made_by_another_process_is_routed_here_at_once(
    make_serving: ServingFactory, database_url: str, redis_url: str
) -> None:
    shared = {"redis_url": redis_url, "serving_refresh_seconds": HOUR}
    a = make_serving(database_url, **shared)
    b = make_serving(database_url, home=a.services.settings.store.home, **shared)
    assert b.services.changes.wait_live(30)
    v1 = a.publish("acme/fraud", "1")
    v2 = a.publish("acme/fraud", "2")
    a.endpoint("fraud")
    first = a.deploy("fraud", [(v1, 100)])  # active, and routed in a
    assert eventually(lambda: b.routed("fraud", first) and b.predict("fraud").status_code == 200)
    second = a.deploy("fraud", [(v2, 100)])
    assert eventually(lambda: b.routed("fraud", second))
    assert b.predict("fraud").json()["model_version"] == "2"
    a.client.post(f"/api/endpoints/fraud/deployments/{second['id']}:rollback")
    assert eventually(lambda: b.routed("fraud", a.deployment("fraud", first["id"])))
    assert b.predict("fraud").json()["model_version"] == "1"
