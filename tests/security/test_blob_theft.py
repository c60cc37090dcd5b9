"""Blobs are shared, content-addressed storage: knowing a digest must not be enough to
read another tenant's file, not even by publishing a version of one's own that lists
it (reading a blob needs seeing a version that lists it)."""

from __future__ import annotations

import pytest

from tests.security.attacks import B_MANIFEST, fill
from tests.security.world import (
    ATTACKER,
    ATTACKER_MODEL,
    ATTACKERS,
    MODEL,
    SIZES,
    VICTIM,
    World,
    publish,
)


@pytest.mark.parametrize("who", ATTACKERS)
def test_listing_another_tenants_blob_in_a_version_does_not_expose_it(
    world: World, who: str
) -> None:
    # A private candidate file of the victim's, for this attacker alone: whether one
    # attacker's theft worked must not decide what the next one can read.
    digest = publish(world.services, VICTIM, MODEL, f"theft-{who}", 10 + ATTACKERS.index(who))
    headers = world.attacker(who)
    manifest = fill(B_MANIFEST, {"digest": digest})
    manifest["files"][0]["size"] = SIZES[digest]
    world.client.post(
        f"/api/models/{ATTACKER}/{ATTACKER_MODEL}/versions",
        json={"version": f"steal-{who}", "manifest": manifest},
        headers=headers,
    )
    for method in ("GET", "HEAD"):
        response = world.client.request(method, f"/api/blobs/{digest}", headers=headers)
        assert response.status_code in (401, 404), (method, response.status_code)
        assert world.leaks(response, f"/api/blobs/{digest}") == []
