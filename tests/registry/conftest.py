"""Registry fixtures (helpers live in ``tests.registry.helpers``)."""

from __future__ import annotations

import os

import pytest
from starlette.testclient import TestClient

from modelport.app import Services
from tests.registry.helpers import Registry

# Validation subprocesses and in-process torch models share few cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def registry(client: TestClient, services: Services) -> Registry:
    return Registry(client, services)
