"""Aliases: atomic moves with history, naming rules, and how ``resolve`` uses them."""

from __future__ import annotations

import itertools
import threading

import pytest

from modelport.errors import NotFound
from tests.registry.helpers import Registry, manifest_for

REF = "acme/adder"


@pytest.fixture
def three(registry: Registry) -> Registry:
    registry.create_model(REF)
    for v in ("1", "2", "3"):
        # A format the runtime lacks validates on its files alone (no subprocess).
        manifest = manifest_for(registry.data, fmt="tflite", path="m.tflite", description=v)
        registry.publish(REF, v, manifest)
    registry.accept_format("tflite")
    return registry


def _put(r: Registry, alias: str, version: str) -> object:
    return r.client.put(f"/api/models/{REF}/aliases/{alias}", json={"version": version})


def test_alias_moves_and_keeps_history(three: Registry) -> None:
    assert _put(three, "prod", "1").json()["version"] == "1"
    assert _put(three, "prod", "3").json()["version"] == "3"
    assert _put(three, "staging", "2").status_code == 200
    listed = three.client.get(f"/api/models/{REF}/aliases").json()["items"]
    assert [(a["alias"], a["version"]) for a in listed] == [("prod", "3"), ("staging", "2")]
    assert three.client.get(f"/api/models/{REF}/aliases/prod").json()["version"] == "3"
    deleted = three.client.delete(f"/api/models/{REF}/aliases/prod")
    assert deleted.status_code == 204
    history = three.client.get(f"/api/models/{REF}/aliases/prod/history").json()["items"]
    assert [(e["previous_version"], e["version"]) for e in history] == [
        (None, "1"),
        ("1", "3"),
        ("3", None),
    ]
    assert all(e["actor"] == "admin" for e in history)
    gone = three.client.get(f"/api/models/{REF}/aliases/prod")
    assert gone.status_code == 404
    assert gone.json()["code"] == "alias_not_found"


def test_alias_errors(three: Registry) -> None:
    missing = _put(three, "prod", "9")
    assert (missing.status_code, missing.json()["code"]) == (404, "version_not_found")
    for bad in ("123", "Prod", "-x"):
        response = _put(three, bad, "1")
        assert (response.status_code, response.json()["code"]) == (400, "invalid_alias")
    delete = three.client.delete(f"/api/models/{REF}/aliases/none")
    assert (delete.status_code, delete.json()["code"]) == (404, "alias_not_found")
    history = three.client.get(f"/api/models/{REF}/aliases/none/history")
    assert history.status_code == 404
    other = three.client.put("/api/models/acme/none/aliases/prod", json={"version": "1"})
    assert other.json()["code"] == "model_not_found"


def test_alias_may_not_be_shadowed_by_a_version(three: Registry) -> None:
    three.publish(REF, "beta", manifest_for(three.data, description="beta"))
    response = _put(three, "beta", "1")
    assert response.status_code == 409
    assert response.json()["code"] == "alias_conflicts_with_version"


def test_concurrent_alias_moves_leave_a_consistent_history(three: Registry) -> None:
    registry = three.services.registry
    barrier = threading.Barrier(6)

    def move(version: str) -> None:
        barrier.wait()
        registry.set_alias("acme", "adder", "prod", version, actor="t")

    threads = [threading.Thread(target=move, args=(v,)) for v in "123123"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = registry.alias_history("acme", "adder", "prod")
    assert len(history) == 6
    assert history[0].previous_version is None
    for before, after in itertools.pairwise(history):
        assert after.previous_version == before.version
    (alias,) = registry.aliases("acme", "adder")
    assert alias.version == history[-1].version


def test_resolve_versions_aliases_and_defaults(three: Registry) -> None:
    registry = three.services.registry
    assert registry.resolve("acme", "adder", "2").version == "2"
    # No default alias and nothing approved: the newest version that is not retired.
    assert registry.resolve("acme", "adder", None).version == "3"
    registry.transition("acme", "adder", "3", "rejected", actor="t")
    assert registry.resolve("acme", "adder", None).version == "2"
    # An approved or deployed version is preferred over newer candidates.
    _approve(three, "1")
    assert registry.resolve("acme", "adder", None).version == "1"
    _put(three, "default", "2")
    assert registry.resolve("acme", "adder", None).version == "2"
    _put(three, "prod", "3")
    assert registry.resolve("acme", "adder", "prod").version == "3"
    with pytest.raises(NotFound) as info:
        registry.resolve("acme", "adder", "canary")
    assert info.value.code == "version_not_found"
    with pytest.raises(NotFound) as info:
        registry.resolve("acme", "nothing", None)
    assert info.value.code == "model_not_found"


def test_resolve_a_model_without_versions(registry: Registry) -> None:
    registry.create_model("acme/empty")
    with pytest.raises(NotFound) as info:
        registry.services.registry.resolve("acme", "empty", None)
    assert info.value.code == "version_not_found"


def _approve(r: Registry, version: str) -> None:
    for to in ("validated", "approved"):
        r.services.registry.transition("acme", "adder", version, to, actor="t")
