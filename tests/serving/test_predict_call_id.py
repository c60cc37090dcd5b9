"""An endpoint's call hands the router the id of the reservation the platform took for
it (what remote backends send as ``Modelport-Call-Id``), and that reservation names the
model called, so usage reported against it can be checked."""

from __future__ import annotations

from typing import Any

from modelport.metering.types import BalanceScope
from tests.serving.conftest import Serving


def test_a_priced_call_hands_its_reservation_id_to_the_backends(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    price = {"model": "acme/fraud", "unit": "compute_ms", "unit_price_micros": 1}
    assert serving.client.post("/api/prices", json=price).status_code == 201
    metering = serving.services.metering
    metering.balances.credit(BalanceScope.TENANT, "admin", 10**9, tenant="admin")
    router = serving.services.serving.router
    predict = router.predict
    seen: list[str] = []

    async def noting(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["call_id"])
        return await predict(*args, **kwargs)

    router.predict = noting  # type: ignore[method-assign]
    assert serving.predict("fraud").status_code == 200
    metering.deliver()
    (call_id,) = {e.event.reservation_id for e in metering.ledger.entries()}
    assert seen == [call_id] and call_id
    held = metering.reservations.get(call_id)
    assert held is not None and held.model == "acme/fraud"
