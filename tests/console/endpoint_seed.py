"""An endpoint of acme's for the endpoint pages: ``summer`` served by acme/summer:1, then
a canary of acme/summer:2 against it (steps 50 → 100, an hour a step, so it stays at
its first step) with acme/summer:3 (the same adder) as its shadow; acme's deployer
dee and its reader rita, each with a key."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.console.conftest import Console
from tests.metering.conftest import approve

ENDPOINT = "summer"
CANARY = {
    "policy": "canary",
    "steps": [50, 100],
    "interval_seconds": 3600,
    "check_seconds": 3600,
    "min_requests": 5,
    "max_p99_increase": 100.0,  # latency is not what these tests are about
}
ROW = [[1.0, 2.0, 3.0, 4.0]]


@dataclass
class Deployed:
    console: Console
    deployer_key: str
    reader_key: str
    stable_id: int
    canary_id: int

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """The API as the platform admin."""
        return self.console.platform.client.request(method, path, **kwargs)

    def deployment(self, ident: int) -> dict[str, Any]:
        response = self.api("GET", f"/api/endpoints/{ENDPOINT}/deployments/{ident}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def traffic(self) -> list[dict[str, Any]]:
        """Where the endpoint's traffic goes now, by the API."""
        response = self.api("GET", f"/api/endpoints/{ENDPOINT}")
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["traffic"]
        return found

    def predict(self, n: int) -> None:
        for _ in range(n):
            response = self.api(
                "POST", f"/api/endpoints/{ENDPOINT}:predict", json={"inputs": {"x": ROW}}
            )
            assert response.status_code == 200, response.text


def wait_for(check: Callable[[], Any], what: str, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def key_of(console: Console, member: str, role: str) -> str:
    tenancy = console.services.tenancy
    tenancy.add_member("acme", member, roles=[role], actor="admin")
    secret: str = tenancy.create_key("acme", member, name=member, actor="admin").secret
    return secret


def deploy_canary(console: Console) -> Deployed:
    publisher = console.platform.publisher
    for number in ("2", "3"):
        publisher.adder("acme/summer", number)
        approve(console.services, "acme", "summer", number)
    seeded = Deployed(
        console,
        deployer_key=key_of(console, "dee", "deployer"),
        reader_key=key_of(console, "rita", "consumer"),
        stable_id=0,
        canary_id=0,
    )
    created = seeded.api("POST", "/api/endpoints", json={"name": ENDPOINT, "tenant": "acme"})
    assert created.status_code == 201, created.text

    def deploy(body: dict[str, Any]) -> int:
        response = seeded.api("POST", f"/api/endpoints/{ENDPOINT}/deployments", json=body)
        assert response.status_code == 202, response.text
        ident = int(response.json()["id"])
        wait_for(lambda: seeded.deployment(ident)["state"] == "active", f"deployment {ident}")
        return ident

    def version(v: str, weight: int = 0) -> dict[str, Any]:
        return {"model": "acme/summer", "version": v, "weight": weight}

    seeded.stable_id = deploy({"versions": [version("1", 100)]})
    seeded.canary_id = deploy(
        {
            "versions": [version("1"), version("2")],
            "shadow": {"model": "acme/summer", "version": "3"},
            "rollout": CANARY,
        }
    )
    wait_for(lambda: [t["weight"] for t in seeded.traffic()] == [50, 50], "the canary's split")
    return seeded
