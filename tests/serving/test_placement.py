"""The placement deployments are budgeted and loaded through: the local host's, and a
gateway's, which holds nothing and budgets nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelport.errors import Unavailable, Unprocessable
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.host import ModelHost
from modelport.serving.placement import LocalPlacement, RemotePlacement
from modelport.serving.types import VersionRef
from tests.serving.conftest import Serving


def _host(tmp_path: Path, budget: int) -> ModelHost:
    return ModelHost(
        cache=ModelCache(tmp_path / "cache"),
        formats=FormatRegistry(),
        budget=MemoryBudget(budget, None),
    )


def _ref(serving: Serving, ref: str) -> VersionRef:
    model, _, version = ref.partition(":")
    owner, name = model.split("/")
    found = serving.services.registry.get_version(owner, name, version)
    return VersionRef(model, version, found.manifest_digest, found.manifest)


def test_local_placement_budgets_against_the_host(tmp_path: Path) -> None:
    host = _host(tmp_path, 1 << 20)
    try:
        placement = LocalPlacement(host, blobs=None)  # type: ignore[arg-type]
        assert placement.capacity() == 1 << 20
        placement.fits(1 << 20, ["acme/fraud:1"])  # exactly the budget: fits
        with pytest.raises(Unprocessable) as refused:
            placement.fits((1 << 20) + 1, ["acme/fraud:1"])
        assert refused.value.code == "insufficient_memory"
        assert refused.value.extra["budget_bytes"] == 1 << 20
        assert placement.lookup("acme/fraud", "1") is None
    finally:
        host.close()


def test_local_placement_places_and_releases_a_version(serving: Serving) -> None:
    ref = serving.publish("acme/fraud", "1")
    placement = serving.services.serving.controller.placement
    assert isinstance(placement, LocalPlacement)
    version = _ref(serving, ref)
    assert placement.status(version) is None
    placement.place(version).result(timeout=30)
    status = placement.status(version)
    assert status is not None and status.state.value == "ready"
    assert placement.lookup("acme/fraud", "1") == status
    placement.release(version)
    assert placement.status(version) is None


def test_remote_placement_budgets_nothing_and_holds_nothing(serving: Serving) -> None:
    placement = RemotePlacement("gateway")
    assert placement.capacity() == 0
    placement.fits(0, [])
    placement.fits(10 << 30, [])  # other processes' versions are theirs to budget
    with pytest.raises(Unavailable) as refused:
        placement.fits(0, ["acme/fraud:1"])  # even a version that declares no memory
    assert refused.value.code == "role_lacks_service"
    assert "acme/fraud:1" in refused.value.message
    version = _ref(serving, serving.publish("acme/fraud", "1"))
    with pytest.raises(Unavailable) as not_here:
        placement.place(version)
    assert not_here.value.code == "role_lacks_service"
    assert placement.status(version) is None and placement.lookup("acme/fraud", "1") is None
    placement.release(version)  # nothing to release: no error
