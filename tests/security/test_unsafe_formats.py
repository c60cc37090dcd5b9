"""A file whose loading executes code (a pickle) is refused whatever the manifest calls
its format: another tenant's publisher must not get code run on the serving hosts
every tenant shares by naming a pickle-based format differently."""

from __future__ import annotations

import pickle

import pytest

from modelport.digests import sha256_digest
from tests.registry.helpers import put_blob
from tests.security.attacks import B_MANIFEST, fill
from tests.security.world import ATTACKER, ATTACKER_MODEL, World

PICKLE = pickle.dumps({"weights": [1.0, 2.0]})
REFUSED_BY_NAME = ("pickle", "pkl", "joblib", "cloudpickle", "dill", "pytorch-pickle")
OTHER_NAMES = ("pt", "pth", "torch", "pytorch", "sklearn", "bin")
"""Pickle-based formats under names the registry does not yet know to be unsafe."""


def _cases() -> list[object]:
    hole = pytest.mark.xfail(strict=True, reason="hole: unsafe formats by another name")
    return [
        *(pytest.param(name, id=name) for name in REFUSED_BY_NAME),
        *(pytest.param(name, id=name, marks=[hole]) for name in OTHER_NAMES),
    ]


@pytest.mark.parametrize("fmt", _cases())
def test_a_pickle_is_refused_under_any_format_name(world: World, fmt: str) -> None:
    digest = put_blob(world.services.blob_store, PICKLE)
    assert digest == sha256_digest(PICKLE)
    manifest = fill(B_MANIFEST, {"digest": digest}) | {"format": fmt}
    manifest["files"][0] |= {"path": "model.bin", "size": len(PICKLE)}
    response = world.client.post(
        f"/api/models/{ATTACKER}/{ATTACKER_MODEL}/versions",
        json={"version": f"pickled-{fmt}", "manifest": manifest},
        headers=world.attacker("publisher"),
    )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "unsafe_format", response.text
