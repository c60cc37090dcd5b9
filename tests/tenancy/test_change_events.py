"""Changes made through the service layer, not through a route, reach the inference
path's caches at once: an alias moved, a grant given or withdrawn, a lifecycle state
changed, a version published; in this process, and in another process sharing the
database and Redis. The resolve cache TTL is an hour, so only the change event can
explain a call seeing the change."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from modelport.app import build_services
from modelport.config import Settings
from modelport.registry import repository as registry_repo
from tests.conftest import ADMIN_KEY, free_port
from tests.polling import eventually
from tests.serve_process import serve, wait_healthy
from tests.tenancy.conftest import World, seed

HOUR = 3600.0
BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
        resolve_cache_ttl_seconds=HOUR,
    )


def _call(world: World, ref: str = "stable") -> httpx.Response:
    """globex's consumer calls acme's private model by ``ref`` over /v2."""
    path = f"/v2/models/acme/private/versions/{ref}/infer"
    return world.client.post(path, json=BODY, headers=world.key("globex", "consumer"))


def _code(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.json().get("code")


Expect = Callable[[Callable[[], bool]], None]


def _at_once(check: Callable[[], bool]) -> None:
    assert check()


def _scenario(world: World, expect: Expect) -> None:
    """Change what globex may call of acme's through the services; ``expect`` checks
    each call that should see the change."""
    registry, tenancy = world.services.registry, world.services.tenancy
    # No grant yet: acme's private model does not exist for globex (and that is cached).
    assert _call(world).status_code == 404
    grant, _ = tenancy.create_grant("acme", "globex", actor="test")
    # Granted, but ``stable`` names version 1, a candidate: not callable across tenants.
    expect(lambda: _code(_call(world)) == (403, "version_not_approved"))
    registry.set_alias("acme", "private", "stable", "2", actor="test")  # approved
    expect(lambda: _call(world).json().get("model_version") == "2")
    registry.transition("acme", "private", "2", "rejected", actor="test")
    expect(lambda: _code(_call(world)) == (403, "version_not_approved"))
    registry.set_alias("acme", "private", "stable", "1", actor="test")
    registry.delete_alias("acme", "private", "stable", actor="test")
    expect(lambda: _call(world).status_code == 404)  # the alias is gone
    assert _code(_call(world, "1")) == (403, "version_not_approved")
    tenancy.delete_grant(grant.id)
    expect(lambda: _code(_call(world, "1")) == (404, "model_not_found"))  # hidden again


def test_service_calls_reach_the_next_v2_call_at_once(world: World) -> None:
    _scenario(world, _at_once)


def test_when_events_may_have_been_lost_every_cached_answer_is_dropped(world: World) -> None:
    world.services.tenancy.create_grant("acme", "globex", actor="test")
    assert _code(_call(world)) == (403, "version_not_approved")
    # Moved without an event, as when Redis dropped it.
    with world.services.database.transaction() as session:
        mid = registry_repo.model_id(session, "acme", "private")
        vid = registry_repo.version_id(session, "acme", "private", "2")
        registry_repo.set_alias(session, mid, "stable", vid, actor="test")
    assert _code(_call(world)) == (403, "version_not_approved")  # cached: nothing told
    world.services.changes.reset()  # what a lost and renewed subscription does
    assert _call(world).json().get("model_version") == "2"


def test_a_new_version_is_what_the_model_resolves_to_at_once(world: World) -> None:
    world.services.registry.create_model("acme", "fresh", actor="test", license="MIT")
    world.publish("acme", "fresh", "1")
    headers = world.key("acme", "consumer")
    first = world.client.post("/v2/models/acme/fresh/infer", json=BODY, headers=headers)
    assert first.status_code == 200, first.text
    world.publish("acme", "fresh", "2")  # the newest candidate, with none approved
    again = world.client.post("/v2/models/acme/fresh/infer", json=BODY, headers=headers)
    assert again.status_code == 200, again.text
    assert (first.json()["model_version"], again.json()["model_version"]) == ("1", "2")


@pytest.fixture
def other_process(
    tmp_path: Path, database_url: str, redis_url: str
) -> Iterator[tuple[World, httpx.Client]]:
    """A server process, and this process's own services on the same PostgreSQL, Redis
    and blobs; the world is seeded here and called there."""
    blobs = tmp_path / "blobs"
    shared = {"database_url": database_url, "redis_url": redis_url, "blob_url": str(blobs)}
    services = build_services(
        Settings(home=tmp_path / "here", admin_key=ADMIN_KEY, **shared)  # type: ignore[arg-type]
    )
    port = free_port()
    process = serve(
        tmp_path / "there",
        port,
        **{f"MODELPORT_{k.upper()}": v for k, v in shared.items()},
        MODELPORT_RESOLVE_CACHE_TTL_SECONDS=str(HOUR),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        with httpx.Client(base_url=url, timeout=30) as client:
            yield seed(client, services), client  # type: ignore[arg-type]
    finally:
        process.terminate()
        process.wait(30)
        services.close()


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_service_calls_in_another_process_reach_the_next_v2_call(
    other_process: tuple[World, httpx.Client],
) -> None:
    world, _ = other_process

    # Through Redis: delivered within milliseconds, but not before the publishing call
    # returns, so a call sent right after may still precede it. Seconds, not the hour.
    def soon(check: Callable[[], bool]) -> None:
        assert eventually(check, seconds=30)

    _scenario(world, soon)
    world.services.registry.create_model("acme", "fresh", actor="test", license="MIT")
    world.publish("acme", "fresh", "1")
    fresh = "/v2/models/acme/fresh/infer"
    headers = world.key("acme", "consumer")
    assert world.client.post(fresh, json=BODY, headers=headers).json()["model_version"] == "1"
    world.publish("acme", "fresh", "2")
    soon(
        lambda: world.client.post(fresh, json=BODY, headers=headers).json()["model_version"] == "2"
    )
