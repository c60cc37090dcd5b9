"""Lifecycle transitions over the API: events, illegal moves, concurrency."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from modelport.errors import Conflict
from tests.registry.helpers import Registry, manifest_for

REF = "acme/adder"


@pytest.fixture
def published(registry: Registry) -> Registry:
    registry.create_model(REF)
    # An unknown (non-executable) format validates on files alone: quick, no subprocess;
    # the operator's decision lets its versions be approved.
    registry.publish(REF, "1", manifest_for(registry.data, fmt="tflite", path="m.tflite"))
    registry.accept_format("tflite")
    return registry


def test_full_lifecycle_records_every_event(published: Registry) -> None:
    steps = [
        ("validated", "checked"),
        ("approved", "looks good"),
        ("deployed", "to prod"),
        ("deprecated", "superseded"),
        ("archived", "done"),
    ]
    for to, reason in steps:
        response = published.transition(REF, "1", to, reason)
        assert response.status_code == 201, response.text
        assert response.json()["state"] == to
        state = published.client.get(f"/api/models/{REF}/versions/1").json()["state"]
        assert state == to
    events = published.client.get(f"/api/models/{REF}/versions/1/events").json()["items"]
    assert [(e["from"], e["to"]) for e in events] == [
        (None, "candidate"),
        ("candidate", "validated"),
        ("validated", "approved"),
        ("approved", "deployed"),
        ("deployed", "deprecated"),
        ("deprecated", "archived"),
    ]
    assert [e["reason"] for e in events[1:]] == [r for _, r in steps]
    assert all(e["actor"] == "admin" and e["created_at"] for e in events)


@pytest.mark.parametrize(
    ("path", "to"),
    [
        ([], "approved"),
        ([], "deployed"),
        ([], "archived"),
        ([], "candidate"),
        (["rejected"], "validated"),
        (["validated", "approved", "deployed"], "rejected"),
        (["rejected", "archived"], "candidate"),
    ],
)
def test_illegal_transitions_are_409(published: Registry, path: list[str], to: str) -> None:
    for step in path:
        assert published.transition(REF, "1", step).status_code == 201
    before = published.client.get(f"/api/models/{REF}/versions/1/events").json()["items"]
    response = published.transition(REF, "1", to)
    assert response.status_code == 409
    problem = response.json()
    assert problem["code"] == "illegal_transition"
    assert problem["to_state"] == to
    assert problem["from_state"] == (path[-1] if path else "candidate")
    after = published.client.get(f"/api/models/{REF}/versions/1/events").json()["items"]
    assert after == before


def test_approved_may_be_deprecated_and_rejected_archived(published: Registry) -> None:
    for to in ("validated", "approved", "deprecated", "archived"):
        assert published.transition(REF, "1", to).status_code == 201
    published.publish(REF, "2", manifest_for(published.data, fmt="tflite", path="n.tflite"))
    for to in ("rejected", "archived"):
        assert published.transition(REF, "2", to).status_code == 201


def test_unknown_target_state_is_400(published: Registry) -> None:
    response = published.transition(REF, "1", "shipped")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_state"


def test_transition_of_unknown_version_is_404(published: Registry) -> None:
    assert published.transition(REF, "404", "rejected").json()["code"] == "version_not_found"
    missing = published.client.post(
        "/api/models/acme/none/versions/1/transitions", json={"to": "rejected"}
    )
    assert missing.json()["code"] == "model_not_found"


def test_concurrent_transitions_from_one_state_only_one_wins(published: Registry) -> None:
    registry = published.services.registry
    for to in ("validated", "approved"):
        registry.transition("acme", "adder", "1", to, actor="t")
    outcomes: list[Any] = []
    barrier = threading.Barrier(4)

    def move(to: str) -> None:
        barrier.wait()
        try:
            outcomes.append(registry.transition("acme", "adder", "1", to, actor="t").to_state)
        except Conflict as exc:
            outcomes.append(exc.code)

    # Neither target is reachable from the other, so whichever wins, the rest must fail.
    targets = ["deployed", "rejected", "deployed", "rejected"]
    threads = [threading.Thread(target=move, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("illegal_transition") == 3
    won = next(o for o in outcomes if o != "illegal_transition")
    events = registry.events("acme", "adder", "1")
    assert [e.from_state for e in events[-1:]] == ["approved"]
    assert events[-1].to_state == won
    assert len(events) == 4
