"""Fixtures of the deployment tests: each role's application, to ask what it serves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy.manifests import RoleApps


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoleApps]:
    built = RoleApps(tmp_path_factory.mktemp("roles"))
    try:
        yield built
    finally:
        built.close()
