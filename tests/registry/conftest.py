"""Registry fixtures (helpers live in ``tests.registry.helpers``)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from modelport.app import Services
from tests.registry.helpers import Registry


@pytest.fixture
def registry(client: TestClient, services: Services) -> Registry:
    return Registry(client, services)
