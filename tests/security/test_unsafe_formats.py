"""A file whose loading executes code (a pickle) is refused whatever the manifest calls
its format: another tenant's publisher must not get code run on the serving hosts
every tenant shares by naming a pickle-based format differently."""

from __future__ import annotations

import pickle

import pytest

from modelport.digests import sha256_digest
from tests.security.attacks import B_MANIFEST, fill
from tests.security.world import ATTACKER, ATTACKER_MODEL, World

PICKLE = pickle.dumps({"weights": [1.0, 2.0]})
REFUSED_BY_NAME = ("pickle", "pkl", "joblib", "cloudpickle", "dill", "pytorch-pickle")
OTHER_NAMES = ("pt", "pth", "torch", "pytorch", "sklearn", "bin")
"""Pickle-based formats under names the registry does not refuse by name."""


@pytest.mark.parametrize("fmt", REFUSED_BY_NAME + OTHER_NAMES)
def test_a_pickle_is_refused_under_any_format_name(world: World, fmt: str) -> None:
    digest = sha256_digest(PICKLE)
    uploaded = world.client.post(
        "/api/uploads",
        params={"digest": digest},
        content=PICKLE,
        headers=world.attacker("publisher"),
    )
    assert uploaded.status_code == 201, uploaded.text
    manifest = fill(B_MANIFEST, {"digest": digest}) | {"format": fmt}
    manifest["files"][0] |= {"path": "model.bin", "size": len(PICKLE)}
    response = world.client.post(
        f"/api/models/{ATTACKER}/{ATTACKER_MODEL}/versions",
        json={"version": f"pickled-{fmt}", "manifest": manifest},
        headers=world.attacker("publisher"),
    )
    assert response.status_code == 400, response.text
    expected = "unsafe_format" if fmt in REFUSED_BY_NAME else "unsafe_content"
    assert response.json()["code"] == expected, response.text
