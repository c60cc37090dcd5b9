"""Deployment state lives in the database: a restarted process resumes it, and another
process sharing the database follows its changes (routing snapshot refreshed on change;
versions loaded, pinned and unloaded there too; a stale rollout never undoes another's)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import event

from tests.polling import eventually
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

    second = make_serving(home=first.services.settings.store.home)
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
        writer.services.settings.store.database_url,
        home=writer.services.settings.store.home,
        serving_refresh_seconds=0.05,
    )
    assert reader.predict("fraud").json()["model_version"] == "1"
    writer.deploy("fraud", [(v2, 100)])
    deadline = time.monotonic() + 30
    while reader.predict("fraud").json()["model_version"] != "2":
        assert time.monotonic() < deadline, "the other process never switched"
        time.sleep(0.05)
    assert {reader.predict("fraud").json()["model_version"] for _ in range(10)} == {"2"}


def test_another_process_loads_pins_and_unloads_as_deployments_change(
    make_serving: ServingFactory, database_url: str
) -> None:
    writer = make_serving(database_url, serving_rollback_window_seconds=60)
    v1 = writer.publish("acme/fraud", "1")
    v2 = writer.publish("acme/fraud", "2", model=add_constant(2.0))
    writer.endpoint("fraud")
    # A worker beside it that never loads on a call: what it serves, it loaded itself.
    other = make_serving(
        database_url,
        home=writer.services.settings.store.home,
        serving_refresh_seconds=0.05,
        serving_rollback_window_seconds=60,  # whichever process activates, the same window
        load_on_demand=False,
    )
    host = other.services.host

    def pinned(version: str) -> bool:
        hosted = host.find("acme/fraud", version)
        status = None if hosted is None else host.status(hosted)
        return status is not None and status.state.value == "ready" and status.pinned

    writer.deploy("fraud", [(v1, 100)])
    assert eventually(lambda: pinned("1")), "the other process loads and pins version 1"
    assert other.predict("fraud").json()["model_version"] == "1"
    replacement = writer.deploy("fraud", [(v2, 100)])
    assert eventually(lambda: pinned("2")), "the other process loads and pins version 2"
    switched = lambda: other.predict("fraud").json().get("model_version") == "2"  # noqa: E731
    assert eventually(switched), "the other process routes to version 2"
    assert pinned("1")  # the rollback standby stays warm there too
    assert eventually(lambda: writer.clock.sleepers == 1), "the writer waits for the window's end"
    # Far past the window, whichever process's clock (started a moment apart) set it.
    writer.clock.advance(3600)  # the writer closes the rollback window: version 1 retires
    # The other process keeps the standby warm by its own clock's window: past it too.
    other.clock.advance(3600)
    writer.wait("fraud", replacement["id"] - 1, lambda d: d["state"] == "retired")
    assert eventually(lambda: host.find("acme/fraud", "1") is None), "the other process unloads 1"
    assert other.predict("fraud").json()["model_version"] == "2"


def test_a_stale_rollout_never_fails_a_deployment_another_process_activated(
    make_serving: ServingFactory, database_url: str
) -> None:
    serving = make_serving(database_url)
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    controller = serving.services.serving.controller
    controller.submit = lambda deployment: None  # nobody rolls it out here
    pending = serving.deploy("fraud", [(v1, 100)], wait=False)
    service = serving.services.serving.endpoints
    ident = pending["id"]
    assert service.activate("fraud", ident, []) is not None  # another process, first
    # This process's rollout, late: its load failed, and it records what it saw.
    assert service.record_progress("fraud", ident, []) is None
    assert service.fail("fraud", ident, "acme/fraud:1: out of memory", []) is None
    body = serving.deployment("fraud", ident)
    assert body["state"] == "active" and body.get("cause") in (None, "")
    assert service.get_endpoint("fraud").active_deployment == ident


def test_a_route_rebuild_reads_one_snapshot(
    make_serving: ServingFactory, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("a SQLite transaction holds the write lock: no one commits between its reads")
    serving = make_serving(database_url)
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    first = serving.deploy("fraud", [(v1, 100)])
    serving.services.serving.controller.submit = lambda deployment: None
    pending = serving.deploy("fraud", [(v2, 100)], wait=False)
    service = serving.services.serving.endpoints
    rebuilding = threading.get_ident()
    done: list[bool] = []

    def between_reads(conn: Any, clause: Any, *rest: Any) -> None:
        # Another process activates the pending deployment right after the rebuild read
        # the endpoints, before it reads the deployments.
        if threading.get_ident() != rebuilding or done or "FROM endpoints" not in str(clause):
            return
        done.append(True)
        other = threading.Thread(target=service.activate, args=("fraud", pending["id"], []))
        other.start()
        other.join(10)

    engine = serving.services.database.engine
    event.listen(engine, "after_execute", between_reads)
    try:
        routes = service.routes()
    finally:
        event.remove(engine, "after_execute", between_reads)
    assert done
    assert routes["fraud"].deployment == first["id"]  # as it was: never a route with none
    assert service.routes()["fraud"].deployment == pending["id"]
