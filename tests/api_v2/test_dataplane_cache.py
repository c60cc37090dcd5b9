"""The data plane's resolution cache: one lookup per model however many callers, a
stale answer served while one refresh runs (for one more TTL at most) should a change
event be lost, and changes made through this process seen at once."""

from __future__ import annotations

import asyncio
import time

import pytest

from modelport.clock import ManualClock
from modelport.errors import NotFound
from modelport.registry import repository as registry_repo


def _counting(plane, monkeypatch) -> list[tuple]:  # type: ignore[no-untyped-def]
    calls: list[tuple] = []
    resolve = plane.registry.resolve

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(args)
        return resolve(*args)

    monkeypatch.setattr(plane.registry, "resolve", counted)
    return calls


def test_concurrent_first_calls_share_one_lookup(v2, monkeypatch) -> None:
    client, _, publisher = v2
    publisher.adder()
    plane = client.app.state.services.inference.targets
    calls = _counting(plane, monkeypatch)

    async def many() -> set[str]:
        targets = await asyncio.gather(*(plane.target("acme", "adder", None) for _ in range(50)))
        return {t.version for t in targets}

    assert asyncio.run(many()) == {"1"}
    assert calls == [("acme", "adder", None)]


def _move_unseen(registry, alias: str, version: str) -> None:  # type: ignore[no-untyped-def]
    """Point ``alias`` of acme/adder at ``version`` in the database, publishing no change
    event: only the cache's TTL can bring it to this process."""
    with registry.database.transaction() as session:
        mid = registry_repo.model_id(session, "acme", "adder")
        vid = registry_repo.version_id(session, "acme", "adder", version)
        registry_repo.set_alias(session, mid, alias, vid, actor="test")


def _two_versions_latest_at_1(make_v2, clock: ManualClock):  # type: ignore[no-untyped-def]
    """acme/adder versions 1 and 2, alias ``latest`` at 1, on ``clock``; the data plane."""
    client, _, publisher = make_v2(clock=clock)
    publisher.adder()
    publisher.adder(version="2")
    plane = client.app.state.services.inference.targets
    plane.registry.set_alias("acme", "adder", "latest", "1", actor="test")
    return plane


def test_a_stale_answer_is_served_while_one_refresh_runs(make_v2, monkeypatch) -> None:
    clock = ManualClock()
    plane = _two_versions_latest_at_1(make_v2, clock)
    registry = plane.registry

    async def scenario() -> tuple[str, list[str], str]:
        plane.resolve_ttl = 2.0
        first = (await plane.target("acme", "adder", "latest")).version
        # Moved behind this process's back, as when another process's event is lost.
        _move_unseen(registry, "latest", "2")
        clock.advance(2.2)  # expired, but well within one more TTL
        calls = _counting(plane, monkeypatch)
        served = [(await plane.target("acme", "adder", "latest")).version for _ in range(20)]
        deadline = time.monotonic() + 30  # until the one refresh lands
        while time.monotonic() < deadline:
            if plane._targets[("acme", "adder", "latest")][1].version == "2":
                break
            await asyncio.sleep(0.01)
        assert len(calls) == 1
        return first, served, (await plane.target("acme", "adder", "latest")).version

    first, served, later = asyncio.run(scenario())
    assert first == "1"
    assert set(served) == {"1"}  # stale, while the refresh ran
    assert later == "2"


def test_an_answer_expired_for_longer_than_the_ttl_is_never_served(make_v2) -> None:
    clock = ManualClock()
    plane = _two_versions_latest_at_1(make_v2, clock)
    registry = plane.registry

    async def scenario() -> tuple[str, str]:
        plane.resolve_ttl = 0.1
        first = (await plane.target("acme", "adder", "latest")).version
        _move_unseen(registry, "latest", "2")
        clock.advance(0.25)  # past twice the TTL: the call waits for a fresh answer
        return first, (await plane.target("acme", "adder", "latest")).version

    assert asyncio.run(scenario()) == ("1", "2")


def test_changes_through_this_process_take_effect_at_once(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    publisher.adder(version="2")
    plane = client.app.state.services.inference.targets
    alias = "/api/models/acme/adder/aliases/latest"
    assert client.put(alias, json={"version": "1"}).status_code == 200

    async def resolved() -> tuple[str, str]:
        target = await plane.target("acme", "adder", "latest")
        return target.version, target.state.value

    assert asyncio.run(resolved()) == ("1", "candidate")  # cached for a second from here
    assert client.put(alias, json={"version": "2"}).status_code == 200
    assert asyncio.run(resolved()) == ("2", "candidate")
    moved = client.post("/api/models/acme/adder/versions/2/transitions", json={"to": "rejected"})
    assert moved.status_code == 201, moved.text
    assert asyncio.run(resolved()) == ("2", "rejected")
    assert client.delete(alias).status_code == 204
    with pytest.raises(NotFound):
        asyncio.run(resolved())


def test_a_version_that_disappears_is_not_served_from_cache(make_v2, monkeypatch) -> None:
    clock = ManualClock()
    client, _, publisher = make_v2(clock=clock)
    publisher.adder()
    plane = client.app.state.services.inference.targets

    async def scenario() -> None:
        plane.resolve_ttl = 1.0
        await plane.target("acme", "adder", "1")
        clock.advance(1.1)  # expired, well within one more TTL

        def gone(*args):  # type: ignore[no-untyped-def]
            raise NotFound("no such version")

        monkeypatch.setattr(plane.registry, "resolve", gone)
        await plane.target("acme", "adder", "1")  # stale, starts the refresh
        deadline = time.monotonic() + 30  # until the refresh failed and dropped the answer
        while time.monotonic() < deadline:
            if ("acme", "adder", "1") not in plane._targets:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(NotFound):
            await plane.target("acme", "adder", "1")

    asyncio.run(scenario())
