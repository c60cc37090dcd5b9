"""Deployment state lives in the database: a restarted process resumes it, and another
process sharing the database follows its changes (routing snapshot refreshed on change)."""

from __future__ import annotations

import time

from tests.serving.conftest import Serving, ServingFactory, add_constant


def stop(serving: Serving) -> None:
    serving.client.__exit__(None, None, None)


def test_a_restarted_process_serves_and_resumes_a_pending_deployment(
    make_serving: ServingFactory,
) -> None:
    first = make_serving()
    v1 = first.publish("acme/fraud", "1")
    v2 = first.publish("acme/fraud", "2", model=add_constant(2.0))
    first.endpoint("fraud")
    active = first.deploy("fraud", [(v1, 100)])
    first.services.serving.controller.submit = lambda deployment: None  # dies before rolling out
    pending = first.deploy("fraud", [(v2, 100)], wait=False)
    stop(first)

    second = make_serving(home=first.services.settings.home)
    host = second.services.host
    second.wait("fraud", pending["id"])  # picked up and rolled out at start
    assert second.deployment("fraud", pending["id"])["state"] == "active"
    assert second.deployment("fraud", active["id"])["state"] == "superseded"
    assert host.find("acme/fraud", "1") is not None  # the rollback standby was warmed
    assert second.predict("fraud").json()["model_version"] == "2"


def test_another_process_follows_the_changes(make_serving: ServingFactory) -> None:
    writer = make_serving()
    v1 = writer.publish("acme/fraud", "1")
    v2 = writer.publish("acme/fraud", "2", model=add_constant(2.0))
    writer.endpoint("fraud")
    writer.deploy("fraud", [(v1, 100)])
    reader = make_serving(
        writer.services.settings.database_url,
        home=writer.services.settings.home,
        serving_refresh_seconds=0.05,
    )
    assert reader.predict("fraud").json()["model_version"] == "1"
    writer.deploy("fraud", [(v2, 100)])
    deadline = time.monotonic() + 10
    while reader.predict("fraud").json()["model_version"] != "2":
        assert time.monotonic() < deadline, "the other process never switched"
        time.sleep(0.05)
    assert {reader.predict("fraud").json()["model_version"] for _ in range(10)} == {"2"}
